#!/usr/bin/env bash
# Installs what lsformer needs to build and test on Debian 12 (bookworm). Idempotent.
#   --bench   also installs python3-torch, the peer the benchmarks in bench/ compare against, and
#             python3-pil, the reference of the image-op fixture (tests/fixtures/gen_image_ops.py).
# The CUDA backend additionally needs the CUDA toolkit (nvcc, cuBLAS) under /usr/local/cuda;
# without it lsformer builds CPU-only.
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config
          libopenblas-openmp-dev   # OpenBLAS on OpenMP: GEMMs share our thread pool
          libpng-dev               # PNG images: Pathfinder, image folders (data/image_decode.cpp)
          libjpeg62-turbo-dev      # JPEG images of image folders (libjpeg-turbo, data/image_decode.cpp)
          zlib1g-dev libzip-dev    # gzip (.dict.dz, IDX .gz) and enwik8.zip / text8.zip (data/compressed_file.cpp)
          dict-gcide               # the offline English corpus for the char-LM (data/debian_corpus.h);
                                   # pulls in the dictd server, which listens on 127.0.0.1 only
          dataset-fashion-mnist    # Fashion-MNIST in /usr/share/datasets (tests, data/idx.h)
          libprotobuf-dev protobuf-compiler  # TensorBoard event files (models/train/tensorboard_event.proto)
          libcairo2-dev            # PNG charts: lsf plot --out curves.png (models/train/svg_png.cpp)
          libopenmpi-dev openmpi-bin  # data-parallel training: MPI and mpirun (engine/mpi_process_group.cpp)
          clang libclang-rt-dev libomp-dev  # the parsers' libFuzzer harnesses (tests/fuzz/, scripts/fuzz.sh)
          catch2 nlohmann-json3-dev)
# python3-pil: the Pillow reference of tests/fixtures/gen_image_ops.py.
if [[ "${1:-}" == "--bench" ]]; then packages+=(python3 python3-torch python3-pil); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: everything is installed"
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
