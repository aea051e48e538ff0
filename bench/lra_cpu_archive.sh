#!/bin/bash
# Keeps what bench/lra_cpu_table.py reads of every finished cell of an LRA grid run by
# bench/run_lra_cpu.sh — OUT/<cell>/{summary.json,config.json,metrics.jsonl} and the result and
# peak-memory lines of OUT/<cell>.log, accuracy cells and timing/ cells — in DEST (default
# bench/lra-cpu-runs), a few tens of KB per cell, small enough to commit. From it the table can
# be rebuilt (bench/lra_cpu_table.py DEST), `lsf plot DEST/<cell>` draws a cell's curves, and a
# grid stopped on one machine continues on another: `cp -r DEST/. OUT/` first, and
# run_lra_cpu.sh skips every cell that has its summary.json.
#
#   bench/lra_cpu_archive.sh OUT [DEST]
set -euo pipefail
out=${1:?usage: bench/lra_cpu_archive.sh OUT [DEST]}
dest=${2:-bench/lra-cpu-runs}
kept=0
while IFS= read -r -d '' summary; do
  cell=$(dirname "$summary")
  rel=${cell#"$out"/}
  mkdir -p "$dest/$rel"
  cp "$cell/summary.json" "$cell/config.json" "$cell/metrics.jsonl" "$dest/$rel/"
  if [[ -f $cell.log ]]; then
    tr '\r' '\n' < "$cell.log" | grep -E 'accuracy|Maximum resident|Elapsed \(wall' > "$dest/$rel.log" || true
  fi
  kept=$((kept + 1))
done < <(find "$out" -name summary.json -print0 | sort -z)
echo "lra_cpu_archive.sh: kept $kept finished cells of $out in $dest"
