# Third-party dependencies of the library: OpenMP for our own loops and OpenBLAS for GEMM.
#
# Threading: we prefer Debian's OpenMP build of OpenBLAS (libopenblas-openmp-dev). It runs its
# GEMMs on the same libgomp thread pool as our loops, and a GEMM called inside one of our
# parallel regions runs single-threaded, so the two never oversubscribe the cores. Debian's
# alternatives system may point libopenblas.so.0 at the pthread build, so the library records
# the OpenMP build's directory as its RUNPATH, which the loader searches before its cache.
find_package(OpenMP REQUIRED COMPONENTS CXX)

set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)   # fails loudly rather than linking the slow reference BLAS

set(LSF_OPENBLAS_DIR "" CACHE PATH "Directory of the OpenMP build of libopenblas (auto-detected)")
if(NOT LSF_OPENBLAS_DIR)
  foreach(candidate /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp /usr/lib64/openblas-openmp)
    if(EXISTS ${candidate}/libopenblas.so)
      set(LSF_OPENBLAS_DIR ${candidate} CACHE PATH "" FORCE)
      break()
    endif()
  endforeach()
endif()

add_library(lsf_openblas INTERFACE)
if(LSF_OPENBLAS_DIR)
  message(STATUS "lsformer: OpenBLAS (OpenMP build) from ${LSF_OPENBLAS_DIR}")
  target_link_libraries(lsf_openblas INTERFACE ${LSF_OPENBLAS_DIR}/libopenblas.so)
  set(LSF_BLAS_NAME "OpenBLAS (OpenMP)")
else()
  message(WARNING "lsformer: the OpenMP build of OpenBLAS was not found (apt-get install "
                  "libopenblas-openmp-dev); using ${BLAS_LIBRARIES}. GEMMs then run on "
                  "OpenBLAS's own threads, which lsformer limits while its own loops run.")
  target_link_libraries(lsf_openblas INTERFACE ${BLAS_LIBRARIES})
  set(LSF_BLAS_NAME "OpenBLAS")
endif()
find_path(LSF_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-openmp)
if(NOT LSF_CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "lsformer: cblas.h not found (apt-get install libopenblas-openmp-dev)")
endif()
target_include_directories(lsf_openblas INTERFACE ${LSF_CBLAS_INCLUDE_DIR})

# JSON (safetensors headers, configs): header-only and private to the library.
find_package(nlohmann_json 3 REQUIRED)

# PNG decoding for the Pathfinder reader and the image datasets (data/pathfinder.cpp,
# data/image_decode.cpp): libpng, private to the library.
find_package(PNG REQUIRED)

# JPEG decoding for image folders (data/image_decode.cpp): Debian's libjpeg62-turbo-dev, the
# libjpeg API of libjpeg-turbo (SIMD decoding; our own error manager replaces its exit()).
find_package(JPEG REQUIRED)
# zlib reads gzip: dictzip (Debian's dictd *.dict.dz, the char-LM corpus; data/compressed_file.cpp)
# and gzip-compressed IDX files (MNIST, Debian's Fashion-MNIST; data/idx.cpp). libzip reads the
# Hutter-prize enwik8.zip / text8.zip. Both private to the library. libzip is found through
# pkg-config: Debian's libzip CMake package references the zipcmp / zipmerge / ziptool programs,
# which other packages ship, so find_package(libzip) fails without them.
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)

# Protocol buffers for TensorBoard's event files (models/train/tensorboard.cpp): Debian's
# libprotobuf-dev and protoc (protobuf-compiler) compile models/train/tensorboard_event.proto.
# Private to the library.
find_package(Protobuf REQUIRED)
if(NOT TARGET protobuf::protoc)
  message(FATAL_ERROR "lsformer: protoc not found (apt-get install protobuf-compiler)")
endif()

# Cairo draws `lsf plot --out curves.png` (models/train/svg_png.cpp): Debian's libcairo2-dev,
# found through pkg-config, private to the library.
pkg_check_modules(CAIRO REQUIRED IMPORTED_TARGET cairo)

# MPI (Debian's libopenmpi-dev, openmpi-bin for mpirun) for data-parallel training across
# processes (engine/mpi_process_group.cpp). LSF_MPI=AUTO|ON|OFF → LSF_WITH_MPI; without it the
# library and `lsf train` build and run single-process. Private to the library.
set(LSF_WITH_MPI OFF)
if(NOT LSF_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(LSF_WITH_MPI ON)
    message(STATUS "lsformer: MPI ${MPI_CXX_VERSION} (data-parallel training), mpiexec: ${MPIEXEC_EXECUTABLE}")
  elseif(LSF_MPI STREQUAL "ON")
    message(FATAL_ERROR "LSF_MPI=ON but MPI was not found (apt-get install libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "lsformer: MPI not found, building without data-parallel training across processes")
  endif()
endif()
