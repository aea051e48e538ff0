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
# "lra-cpu" section of bench/RESULTS.md), NOTE (a paragraph for that section's header, e.g. which
# builds ran which cells when a grid spanned several). A cell whose run directory already holds summary.json is
# not run again, so an interrupted grid continues where it stopped.
#
# Two phases (PHASES, default "accuracy timing"):
# - accuracy: the 27 training runs (about 3.5 hours on 2 cores). Their accuracy and peak memory
#   do not depend on the load (fixed threads, deterministic kernels), so they may run on a busy
#   machine, e.g. under `nice -n 19`, across sessions;
# - timing: each task × attention once more for TIMING_STEPS (60) steps into OUT/timing/, run on
#   a quiet machine (a few minutes): the table's time per step comes from these runs when present,
#   so a loaded accuracy phase does not skew it.
set -euo pipefail
out=${1:-runs/lra-cpu}
tasks=${TASKS:-listops pathfinder32 image}
attentions=${ATTENTIONS:-ls full linformer}
seeds=${SEEDS:-1 2 3}
threads=${THREADS:-2}
phases=${PHASES:-accuracy timing}
timing_steps=${TIMING_STEPS:-60}
read -r -a extra <<< "${EXTRA:-}"
lsf=./build/tools/lsf
[[ -x $lsf ]] || { echo "run_lra_cpu.sh: $lsf not found: build it first (cmake --build build --target lsf)" >&2; exit 1; }
mkdir -p "$out"
# run_cell CONFIG RUN_DIR [lsf train flags...]: one training run under /usr/bin/time -v (peak RSS).
run_cell() {
  local config=$1 run=$2
  shift 2
  rm -rf "$run"
  OMP_WAIT_POLICY=passive /usr/bin/time -v "$lsf" train --config "$config" --threads "$threads" \
    --out "$run" "$@" "${extra[@]}" > "$run.log" 2>&1 \
    || { echo "run_lra_cpu.sh: $run failed, see $run.log" >&2; exit 1; }
}
if [[ " $phases " == *" accuracy "* ]]; then
  for task in $tasks; do
    for attention in $attentions; do
      config=configs/lra-cpu/${task}_${attention}.json
      [[ -f $config ]] || { echo "run_lra_cpu.sh: no config $config" >&2; exit 1; }
      for seed in $seeds; do
        run=$out/${task}_${attention}_s$seed
        if [[ -f $run/summary.json ]]; then echo "$run: done before, kept"; continue; fi
        echo "$(date -u +%H:%M:%S) $task / $attention / seed $seed → $run"
        run_cell "$config" "$run" --set train.seed="$seed"
        tr '\r' '\n' < "$run.log" | grep -E '^ +test accuracy|Maximum resident' || true
      done
    done
  done
fi
if [[ " $phases " == *" timing "* ]]; then
  mkdir -p "$out/timing"
  for task in $tasks; do
    for attention in $attentions; do
      run=$out/timing/${task}_${attention}
      if [[ -f $run/summary.json ]]; then echo "$run: done before, kept"; continue; fi
      echo "$(date -u +%H:%M:%S) timing $task / $attention ($timing_steps steps) → $run"
      run_cell "configs/lra-cpu/${task}_${attention}.json" "$run" --set train.steps="$timing_steps" \
        --set schedule.warmup_steps=$((timing_steps / 10)) --set train.log_every=10 \
        --set train.eval_every=0 --set train.checkpoint_every=0
    done
  done
fi
write=()
[[ ${WRITE:-0} == 1 ]] && write=(--write bench/RESULTS.md)
read -r -a seed_list <<< "$seeds"
/usr/bin/python3 bench/lra_cpu_table.py "$out" --seeds "${#seed_list[@]}" --note "${NOTE:-}" "${write[@]}"
