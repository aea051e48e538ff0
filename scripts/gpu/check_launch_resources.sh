#!/usr/bin/env bash
# Build-time check of the CUDA kernels' launch resources, without a GPU: compiles each .cu file
# to PTX and through ptxas -v for every architecture asked, and fails when a kernel needs more
# registers per block than a block may hold (65536 on every architecture since sm_50), which is
# the "too many resources requested for launch" a GPU run would only report when that launch
# happens (issue #19: softmax_rows_kernel<double, …, 1024> used 66 registers × 1024 threads).
#
# A kernel's block size is its __launch_bounds__ (the PTX .maxntid); a kernel without one may be
# launched with up to 1024 threads, so it must fit those: ≤ 64 registers. A kernel that needs
# more declares the block size it is launched with. Registers are allocated per warp in units of
# 256, so a block of T threads at r registers holds ceil(32·r / 256)·256 · ceil(T / 32).
# Spilled bytes are listed (a performance matter, not a launch failure) but do not fail.
#
#   check_launch_resources.sh --nvcc PATH --arch 90 [--arch 80 …] --work DIR [--jobs N]
#                             [nvcc flags: -I…, -D…] -- FILE.cu …
#
# CTest runs it over cuda/*.cu in every CUDA build (tests/CMakeLists.txt, test
# cuda_build:launch_resources); tests/fixtures/cuda_over_budget.cu checks that it catches one.
set -euo pipefail

nvcc=""
archs=()
work=""
jobs=$(nproc 2>/dev/null || echo 2)
flags=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --nvcc) nvcc=$2; shift 2 ;;
    --arch) archs+=("$2"); shift 2 ;;
    --work) work=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --) shift; break ;;
    *) flags+=("$1"); shift ;;
  esac
done
sources=("$@")
die() { echo "check_launch_resources: $*" >&2; exit 2; }
[[ -n $nvcc && -x $nvcc ]] || die "--nvcc must name the nvcc executable (got '${nvcc}')"
ptxas=$(dirname "$nvcc")/ptxas
[[ -x $ptxas ]] || die "no ptxas next to $nvcc"
[[ ${#archs[@]} -gt 0 ]] || die "no --arch given (e.g. --arch 90)"
[[ -n $work ]] || die "no --work folder given"
[[ ${#sources[@]} -gt 0 ]] || die "no .cu files given after --"
for s in "${sources[@]}"; do [[ -f $s ]] || die "no such source file: $s"; done
mkdir -p "$work"
here=$(cd "$(dirname "$0")" && pwd)

status=0
for arch in "${archs[@]}"; do
  arch=${arch%%-*}  # CMake's 90-real / 90-virtual
  [[ $arch =~ ^[0-9]+a?$ ]] || die "architecture '$arch' is not a number such as 90"
  out="$work/sm_$arch"
  rm -rf "$out" && mkdir -p "$out"
  # One job per source file: PTX (cicc), then ptxas -v on it, as nvcc itself would run them.
  export nvcc ptxas arch out
  printf '%s\0' "${sources[@]}" | xargs -0 -P "$jobs" -I{} bash -c '
    src=$1; shift
    base=$(basename "$src" .cu)
    if ! "$nvcc" -arch=compute_$arch -ptx "$@" "$src" -o "$out/$base.ptx" 2> "$out/$base.nvcc.log"; then
      echo "FAILED to compile $src to PTX for compute_$arch:"; cat "$out/$base.nvcc.log"; exit 1
    fi
    if ! "$ptxas" -arch=sm_$arch -v "$out/$base.ptx" -o /dev/null 2> "$out/$base.ptxas.log"; then
      echo "FAILED: ptxas on $src for sm_$arch:"; cat "$out/$base.ptxas.log"; exit 1
    fi' _ {} "${flags[@]}" || { status=1; continue; }
  # The table: status, registers, block size (- = none declared), registers per block, spilled
  # bytes, mangled name; sorted with the failures and the largest users first.
  shopt -s nullglob
  ptx_files=("$out"/*.ptx)
  ptxas_logs=("$out"/*.ptxas.log)
  shopt -u nullglob
  if ! awk -f "$here/launch_resources.awk" "${ptx_files[@]}" "${ptxas_logs[@]}" > "$out/table.tsv" 2> "$out/summary"; then
    echo "sm_$arch: $(cat "$out/summary")"
    status=1
    continue
  fi
  read -r kernels over spilling < "$out/summary"
  demangle=cat
  command -v c++filt > /dev/null && demangle=c++filt
  sort -t$'\t' -k1,1r -k2,2nr "$out/table.tsv" > "$out/table.sorted.tsv"
  echo "sm_$arch: $kernels kernels, $over over the 65536 registers of a block, $spilling spilling"
  echo "  status  regs  block  regs/block  spilled  kernel"
  # Every failure, then the ten largest register users.
  { awk -F'\t' '$1 == "OVER"' "$out/table.sorted.tsv"; awk -F'\t' '$1 != "OVER" && shown++ < 10' "$out/table.sorted.tsv"; } |
    $demangle | awk -F'\t' '{ printf "  %-6s %5s  %5s  %10s  %7s  %s\n", $1, $2, $3, $4, $5, substr($6, 1, 150) }'
  if [[ $spilling -gt 0 ]]; then
    echo "  spilling kernels:"
    awk -F'\t' '$5 > 0' "$out/table.sorted.tsv" | $demangle | awk -F'\t' '{ printf "    %s bytes  %s\n", $5, substr($6, 1, 150) }'
  fi
  [[ $over -eq 0 ]] || status=1
done
if [[ $status -eq 0 ]]; then echo "launch resources: every kernel fits its block"; else echo "launch resources: FAILED"; fi
exit $status
