#!/usr/bin/env bash
# The README's test command: install dependencies, build everything (library, tools, tests,
# benchmarks; the CUDA backend too when nvcc is present), run the whole test suite, then build
# and run examples/embed against an installed copy of the package.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLSF_CUDA="${LSF_CUDA:-AUTO}" \
      -DCMAKE_INSTALL_PREFIX="$PWD/build/install"
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

# The parsers' fuzzers (tests/fuzz/, clang with libFuzzer + ASan + UBSan): 5,000 inputs per
# harness from a fixed seed, so a failure is reproducible; about 2.5 min to build and 0.5 min to
# run on 2 cores (docs/reliability.md). Skipped, saying so, where clang has no libFuzzer.
if command -v clang++ >/dev/null &&
   echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     clang++ -x c++ -fsanitize=fuzzer -fopenmp - -o /dev/null 2>/dev/null; then
  FUZZ_RUNS=5000 JOBS="$jobs" scripts/fuzz.sh
else
  echo "fuzzing skipped: clang++ with libFuzzer (libclang-rt) and OpenMP (libomp) is not installed"
fi

# A separate project that find_package()s the installed lsformer.
cmake --install build >/dev/null
cmake -S examples/embed -B build/embed -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install"
cmake --build build/embed
./build/embed/embed
echo "examples/embed: built and ran against the installed package"
