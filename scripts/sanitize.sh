#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (.ci/run runs it after
# scripts/test.sh): configures build-asan/ (SANITIZE_BUILD_DIR) with LSF_SANITIZE=address,undefined,
# LSF_CUDA=OFF and no benchmarks, builds the library, tools and tests, and runs every CTest test
# under it. Any sanitizer report aborts the test that triggered it (-fno-sanitize-recover=all),
# failing the script. Prints the build and test times (docs/reliability.md §2 records them).
#
# The library and tools are compiled at -O1 -g1 (line tables: sanitizer reports name file:line;
# full -g adds a third to the compile time), the tests' own files at -O0 (LSF_TEST_COMPILE_OPTIONS):
# instrumented, Catch2's assertion machinery costs 2-4x more to compile at -O1 than the tests'
# own code ever takes to run, while the code under test keeps its -O1. Every test file is still
# compiled with both sanitizers. No unity build: the library's files reuse helper names in
# anonymous namespaces, which one unity translation unit cannot hold.
#   scripts/sanitize.sh                 # JOBS = the core count by default
#   ASAN_OPTIONS=detect_leaks=1 scripts/sanitize.sh    # leak checks too (off by default: the
#                                       # OpenMP and OpenBLAS runtimes keep allocations to exit)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SANITIZE_BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DLSF_TEST_COMPILE_OPTIONS=-O0 -DLSF_CUDA=OFF -DLSF_SANITIZE=address,undefined -DLSF_BUILD_BENCH=OFF
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
