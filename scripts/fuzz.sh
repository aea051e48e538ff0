#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# and runs each for SECONDS (default 30) on its seed corpus (tests/fuzz/corpus/<harness>/).
# Only the sources the parsers need are compiled (the engine, the data readers, the config
# layer), into build-fuzz/ (FUZZ_BUILD_DIR), so the build takes a few minutes, not the whole
# library's. Any crash, leak, undefined behaviour, timeout (-timeout=10 s per input) or
# allocation over 2 GiB (-rss_limit_mb) fails the script; libFuzzer writes the input as
# build-fuzz/artifacts/<harness>/crash-*: fix the bug and add the input to the corpus.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      e.g. scripts/fuzz.sh 20, scripts/fuzz.sh 600 fuzz_image
#   (SECONDS 0: build only; FUZZ_RUNS=N: N inputs per harness from seed 1, as CI does)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
shift || true
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-2}
CXX=${FUZZ_CXX:-clang++}
mkdir -p "$BUILD/include/lsformer" "$BUILD/obj" "$BUILD/bin" "$BUILD/artifacts"
for d in engine ops models data cuda; do ln -sfn "$PWD/$d" "$BUILD/include/lsformer/$d"; done

FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fopenmp -I"$BUILD/include" -I/usr/include/nlohmann
       -fsanitize=address,undefined -fno-sanitize-recover=undefined -Wno-unknown-pragmas)
# What the parsers need: the engine (tensors, safetensors), the data readers, the config layer.
# (engine/info.cpp is left out: it reports the build, from a header CMake generates; so is
# engine/mpi_process_group.cpp: MPI is not a parser, and it needs mpi.h.)
SOURCES=($(ls engine/*.cpp | grep -v -e engine/info.cpp -e engine/mpi_process_group.cpp) data/file_util.cpp data/listops.cpp data/text.cpp data/retrieval.cpp data/cifar.cpp
         data/idx.cpp data/image_decode.cpp data/image.cpp data/image_dataset.cpp data/char_corpus.cpp
         data/compressed_file.cpp data/debian_corpus.cpp models/train/config.cpp models/train/task.cpp
         models/nn/module.cpp models/nn/init.cpp ops/factory.cpp)
LIBS=(-lpng -ljpeg -lz -lzip -lopenblas)

start=$(date +%s)
objects=()
pids=()
for src in "${SOURCES[@]}"; do
  obj="$BUILD/obj/${src//\//_}.o"
  objects+=("$obj")
  if [[ ! -f "$obj" || "$src" -nt "$obj" ]]; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
    pids+=($!)
    if (( ${#pids[@]} >= JOBS )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
# The engine's objects are linked whole (their static initialisers register the kernels); the
# rest through an archive, so a harness takes only the readers it calls.
engine_objects=() other_objects=()
for o in "${objects[@]}"; do
  if [[ $(basename "$o") == engine_* ]]; then engine_objects+=("$o"); else other_objects+=("$o"); fi
done
rm -f "$BUILD/libparsers.a"
ar rcs "$BUILD/libparsers.a" "${other_objects[@]}"
harnesses=("$@")
if (( ${#harnesses[@]} == 0 )); then
  for f in tests/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
fi
for h in "${harnesses[@]}"; do
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "tests/fuzz/$h.cpp" "${engine_objects[@]}" "$BUILD/libparsers.a" "${LIBS[@]}" -o "$BUILD/bin/$h"
done
echo "fuzz build: $(( $(date +%s) - start )) s"
(( SECONDS_EACH > 0 )) || exit 0  # 0: build only

# FUZZ_RUNS=N: N inputs per harness from a fixed seed instead of SECONDS (what CI runs, with 5000:
# deterministic, so a CI failure is a real, reproducible finding).
if [[ -n "${FUZZ_RUNS:-}" ]]; then budget=(-runs="$FUZZ_RUNS" -seed=1); else budget=(-max_total_time="$SECONDS_EACH"); fi
status=0
for h in "${harnesses[@]}"; do
  corpus="tests/fuzz/corpus/$h"
  work="$BUILD/corpus/$h"  # new inputs go here; the committed seeds stay as they are
  mkdir -p "$work" "$BUILD/artifacts/$h"
  if [[ -n "${FUZZ_RUNS:-}" ]]; then echo "== $h: $FUZZ_RUNS runs"; else echo "== $h: $SECONDS_EACH s"; fi
  if ! UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
      "$BUILD/bin/$h" "$work" "$corpus" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$h/" \
      > "$BUILD/$h.log" 2>&1; then
    echo "FAILED: $h (log: $BUILD/$h.log)"; tail -40 "$BUILD/$h.log"; status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs in" "$BUILD/$h.log" | tr '\n' ' '; echo
  fi
done
exit $status
