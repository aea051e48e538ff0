#!/bin/bash
# The paper's LRA comparison (Table 1) at CPU scale, on the tasks that need no download
# (issue #22; bench/RESULTS.md "LRA on the CPU"): ListOps, Pathfinder-32 and Image
# (Fashion-MNIST as the offline stand-in for CIFAR-10) × long-short (w, r = 8, 32), full
# attention and Linformer (k = 256) × 3 seeds, each cell the committed config
# configs/lra-cpu/<task>_<attention>.json with train.seed = the seed, one run after the other
# under /usr/bin/time -v (peak RSS). Then bench/lra_cpu_table.py writes the table (mean ± std of
# the test accuracy over the seeds, training time per step, peak memory) beside the paper's.
#
#   bench/run_lra_cpu.sh [OUT_DIR]                (from the repository root, after building lsf)
#
# Environment: TASKS (default "listops pathfinder32 image"), ATTENTIONS ("ls full linformer"),
# SEEDS ("1 2 3"), THREADS (2), EXTRA (more lsf train flags for every run, e.g. a quick check:
# EXTRA="--set train.steps=20 --set schedule.warmup_steps=2"), WRITE=1 (also rewrite the
# "lra-cpu" section of bench/RESULTS.md). A cell whose run directory already holds summary.json is
# not run again, so an interrupted grid continues where it stopped. The whole grid takes about
# 4 hours on 2 quiet cores; run it on a quiet machine, the times are part of the result.
set -euo pipefail
out=${1:-runs/lra-cpu}
tasks=${TASKS:-listops pathfinder32 image}
attentions=${ATTENTIONS:-ls full linformer}
seeds=${SEEDS:-1 2 3}
threads=${THREADS:-2}
read -r -a extra <<< "${EXTRA:-}"
lsf=./build/tools/lsf
[[ -x $lsf ]] || { echo "run_lra_cpu.sh: $lsf not found: build it first (cmake --build build --target lsf)" >&2; exit 1; }
mkdir -p "$out"
for task in $tasks; do
  for attention in $attentions; do
    config=configs/lra-cpu/${task}_${attention}.json
    [[ -f $config ]] || { echo "run_lra_cpu.sh: no config $config" >&2; exit 1; }
    for seed in $seeds; do
      run=$out/${task}_${attention}_s$seed
      if [[ -f $run/summary.json ]]; then echo "$run: done before, kept"; continue; fi
      rm -rf "$run"
      echo "$(date -u +%H:%M:%S) $task / $attention / seed $seed → $run"
      OMP_WAIT_POLICY=passive /usr/bin/time -v "$lsf" train --config "$config" --set train.seed="$seed" \
        --threads "$threads" --out "$run" "${extra[@]}" > "$run.log" 2>&1 \
        || { echo "run_lra_cpu.sh: $run failed, see $run.log" >&2; exit 1; }
      tr '\r' '\n' < "$run.log" | grep -E '^ +test accuracy|Maximum resident' || true
    done
  done
done
write=()
[[ ${WRITE:-0} == 1 ]] && write=(--write bench/RESULTS.md)
/usr/bin/python3 bench/lra_cpu_table.py "$out" "${write[@]}"
