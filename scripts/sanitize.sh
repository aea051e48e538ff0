#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer: configures
# build-asan/ (SANITIZE_BUILD_DIR) with LSF_SANITIZE=address,undefined, LSF_CUDA=OFF, -O1 -g and
# no benchmarks, builds the library, tools and tests, and runs every CTest test under it. Any
# sanitizer report aborts the test that triggered it (-fno-sanitize-recover=all), failing the
# script. Prints the build and test times (docs/reliability.md records them). Not run by
# scripts/test.sh: on 2 shared cores it costs more than CI's margin (docs/reliability.md).
#   scripts/sanitize.sh                 # JOBS=2 by default; UNITY=1 for a unity build
#   ASAN_OPTIONS=detect_leaks=1 scripts/sanitize.sh    # leak checks too (off by default: the
#                                       # OpenMP and OpenBLAS runtimes keep allocations to exit)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SANITIZE_BUILD_DIR:-build-asan}
JOBS=${JOBS:-2}
start=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DLSF_CUDA=OFF -DLSF_SANITIZE=address,undefined -DLSF_BUILD_BENCH=OFF ${UNITY:+-DCMAKE_UNITY_BUILD=ON}
cmake --build "$BUILD" -j"$JOBS"
built=$(date +%s)
echo "sanitizer build: $((built - start)) s"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}:abort_on_error=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}:halt_on_error=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive
status=0
ctest --test-dir "$BUILD" -j"$JOBS" --output-on-failure --timeout 1800 || status=$?
echo "sanitizer build: $((built - start)) s, tests: $(( $(date +%s) - built )) s"
exit $status
