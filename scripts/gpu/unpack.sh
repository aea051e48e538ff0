# Sourced by check.sh and profile_attention.sh on the GPU machine: unpacks the archive
# bundle.sh made ($bundle) into a fresh folder ($work: bin/ and lib/) and puts its libraries,
# then CUDA's own (the toolkit's, or those PyTorch's wheels carry), on LD_LIBRARY_PATH.
work=$(mktemp -d)
tar xJf "$bundle" -C "$work" || { echo "cannot unpack $bundle" >&2; exit 1; }
libdirs=""
for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  p=$(find /usr/local /opt /usr/lib -name "$name" 2>/dev/null | head -1)
  [[ -n "$p" ]] && libdirs="$libdirs:$(dirname "$p")"
done
export LD_LIBRARY_PATH="$work/lib$libdirs:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
