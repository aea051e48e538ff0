#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, over the archive scripts/gpu/bundle.sh made:
# every [cuda] test case with LSF_EXPECT_CUDA=1 (a missing device fails instead of skipping),
# the suite once more with CUDA_LAUNCH_BLOCKING=1, compute-sanitizer (memcheck on every suite,
# racecheck and synccheck on the shared-memory kernels), then, unless --no-bench, the GPU
# benchmarks beside their PyTorch peers (bench/run_gpu.py: markdown tables of medians, fastest
# calls and speed-ups). Logs go to $OUT (the device tool's folder) or ./gpu-logs; a summary is
# printed last.
#
#   bash scripts/gpu/check.sh [.gpu/bundle.tar.xz] [--no-bench]
set -u
bundle=.gpu/bundle.tar.xz
bench=1
for a in "$@"; do
  case $a in
    --no-bench) bench=0 ;;
    *) bundle=$a ;;
  esac
done
logs=${OUT:-gpu-logs}
mkdir -p "$logs"
root=$PWD
t0=$(date +%s)
say() { echo "== $* (t=$(( $(date +%s) - t0 )) s)"; }
source "$(dirname "$0")/unpack.sh"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  ldd "$work/bin/lsf" | grep 'not found'
  "$work/bin/lsf" info --threads 1
} > "$logs/env.log" 2>&1
grep -E 'NVIDIA|not found|CUDA|cuda:' "$logs/env.log"

export LSF_EXPECT_CUDA=1 OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2
cd "$work/bin"
suites=$(ls test_*)
say tests
for t in $suites; do
  ( timeout 150 ./"$t" "[cuda]" -d yes > "$work/$t.log" 2>&1; echo "rc=$?" >> "$work/$t.log" ) &
  ( CUDA_LAUNCH_BLOCKING=1 timeout 150 ./"$t" "[cuda]" > "$work/blocking_$t.log" 2>&1; echo "rc=$?" >> "$work/blocking_$t.log" ) &
done
wait
say sanitizers
# The allocator's out-of-memory test fails a cudaMalloc on purpose: memcheck would count it.
# The [trainer] case runs whole training steps (thousands of launches): too slow under memcheck
# for the timeout; its kernels are the ones the other cases check one by one.
for t in $suites; do
  ( timeout 150 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 ./"$t" "[cuda]~[oom]~[trainer]" \
      > "$work/memcheck_$t.log" 2>&1; echo "rc=$?" >> "$work/memcheck_$t.log" ) &
done
for tool in racecheck synccheck; do
  ( timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 ./test_cuda_long_short "*random shapes*" \
      > "$work/${tool}_long_short.log" 2>&1; echo "rc=$?" >> "$work/${tool}_long_short.log" ) &
  ( timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 ./test_cuda_norm \
      "CUDA layer_norm*,CUDA softmax and*,CUDA cross_entropy and*" \
      > "$work/${tool}_norm.log" 2>&1; echo "rc=$?" >> "$work/${tool}_norm.log" ) &
  ( timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 ./test_cuda_reduce "CUDA sum*,CUDA max/min*" \
      > "$work/${tool}_reduce.log" 2>&1; echo "rc=$?" >> "$work/${tool}_reduce.log" ) &
done
wait
cd "$root"
for f in "$work"/test_*.log "$work"/blocking_*.log; do echo "##### $(basename "$f")"; cat "$f"; done > "$logs/tests.log"
for f in "$work"/memcheck_*.log "$work"/racecheck_*.log "$work"/synccheck_*.log; do
  echo "##### $(basename "$f")"; head -c 20000 "$f"; echo; tail -4 "$f"
done > "$logs/sanitizers.log"
if [[ $bench == 1 ]]; then
  say benchmarks
  # Side by side, two rounds per dtype alternating which side runs first (~4 min on an H200).
  timeout 420 python3 bench/run_gpu.py --bin "$work/bin" --rounds 2 --json-out "$logs/bench.json" \
    > "$logs/bench.md" 2> "$logs/bench.log"
  echo "bench/run_gpu.py rc=$?" >> "$logs/bench.log"
fi
say done
echo "suite                  rc  blocking  result"
for t in $suites; do
  printf '%-22s %-4s %-9s %s\n' "$t" "$(tail -1 "$work/$t.log" | cut -d= -f2)" \
    "$(tail -1 "$work/blocking_$t.log" | cut -d= -f2)" "$(grep -E '^(test cases|All tests)' "$work/$t.log" | tail -1)"
done
echo "sanitizer run                      rc  errors"
for f in "$work"/memcheck_*.log "$work"/racecheck_*.log "$work"/synccheck_*.log; do
  printf '%-34s %-3s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f" | cut -d= -f2)" \
    "$(grep -m1 'ERROR SUMMARY' "$f" | sed 's/=* *//')"
done
fail=0
for f in "$work"/test_*.log "$work"/blocking_*.log "$work"/memcheck_*.log "$work"/racecheck_*.log "$work"/synccheck_*.log; do
  [[ "$(tail -1 "$f")" == "rc=0" ]] || fail=1
done
[[ $bench == 1 ]] && cat "$logs/bench.md" && tail -1 "$logs/bench.log"
exit $fail
