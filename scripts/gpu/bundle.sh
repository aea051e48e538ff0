#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run the [cuda] suite and the GPU benchmarks without
# building there: the CUDA test programs, bench_cuda_ops, bench_cuda_attention, lsf,
# liblsformer and every shared library they load that is not glibc, libstdc++ or CUDA's own
# (the GPU machine has those; it has no OpenBLAS, libzip, MPI, ...). CUDA code runs as sm_90
# machine code, so build for Hopper first:
#
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLSF_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
#   ninja -C build-gpu $(scripts/gpu/bundle.sh --targets)
#   scripts/gpu/bundle.sh build-gpu .gpu/bundle.tar.xz
#
# The archive (~17 MB xz) travels to the device machine in an ignored folder (the device tool's
# `carry`), where scripts/gpu/check.sh unpacks and runs it.
set -euo pipefail
# Every test program with a [cuda] test case, from the sources (a new suite travels without an edit here).
root=$(cd "$(dirname "$0")/../.." && pwd)
tests=$(grep -l '\[cuda\]' "$root"/tests/test_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
benches="bench_cuda_ops bench_cuda_attention"
if [[ "${1:-}" == "--targets" ]]; then
  echo $tests $benches lsf
  exit 0
fi
[[ $# -eq 2 ]] || { echo "usage: $0 BUILD_DIR OUT.tar.xz   (or $0 --targets)" >&2; exit 2; }
build=$1
out=$2
grep -q 'CMAKE_CUDA_ARCHITECTURES:STRING=.*90' "$build/CMakeCache.txt" ||
  { echo "$build is not a CUDA build for sm_90 (configure with -DLSF_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for t in $tests; do cp "$build/tests/$t" "$stage/bin/"; done
for b in $benches; do cp "$build/bench/$b" "$stage/bin/"; done
cp "$build/tools/lsf" "$stage/bin/"
cp -L "$build/liblsformer.so.0" "$stage/lib/"
# Every library the engine loads, less the C/C++ runtime (the device image's is newer and
# compatible) and CUDA's (cudart, cuBLAS, NCCL: found there by check.sh).
ldd "$build/liblsformer.so.0" | awk '/=>/ {print $1, $3}' | while read -r name path; do
  case $name in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*) ;;
    libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libnccl.so.*|libcudnn*.so.*) ;;
    *) cp -L "$path" "$stage/lib/$name" ;;
  esac
done
strip --strip-unneeded "$stage/lib/liblsformer.so.0" "$stage"/bin/*
mkdir -p "$(dirname "$out")"
tar cJf "$out" -C "$stage" .
echo "$out: $(du -h "$out" | cut -f1)"
