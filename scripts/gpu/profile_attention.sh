#!/usr/bin/env bash
# On a GPU machine, from the repository root: Nsight Compute's view of the fused long-short
# kernels (ls_forward, ls_backward_rows, ls_backward_keys, ls_reduce_bar) inside
# bench_cuda_attention — time, speed of light (compute and memory throughput against the
# chip's peaks), launch resources and occupancy — for a wide and a narrow window at n = 16384,
# f32. Clocks are left as the card has them (--clock-control none). Reports go to $OUT (or
# ./gpu-logs).
#
#   bash scripts/gpu/profile_attention.sh [.gpu/bundle.tar.xz]
set -u
bundle=${1:-.gpu/bundle.tar.xz}
logs=${OUT:-gpu-logs}
mkdir -p "$logs"
source "$(dirname "$0")/unpack.sh"
for w in 128 8; do
  timeout 200 ncu --clock-control none -k regex:'^ls_' -c 8 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    "$work/bin/bench_cuda_attention" --heads 8 --dtype f32 --filter "n=16384 w=$w " > "$logs/ncu_w$w.txt" 2>&1
  echo "w=$w rc=$?"
  grep -E '^  ls_|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Dynamic Shared' \
    "$logs/ncu_w$w.txt" | head -60
done
