# LSF_CUDA=AUTO|ON|OFF → LSF_WITH_CUDA. AUTO builds cuda/ whenever nvcc is found, so a machine
# with the toolkit but no GPU (like CI) still catches CUDA compile errors.
set(LSF_WITH_CUDA OFF)
if(NOT LSF_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(LSF_WITH_CUDA ON)
  elseif(LSF_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LSF_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "lsformer: nvcc not found, building without the CUDA backend")
  endif()
endif()

if(LSF_WITH_CUDA)
  # Ampere and Hopper by default; -DCMAKE_CUDA_ARCHITECTURES or the CUDAARCHS environment
  # variable choose others (.ci/run compiles sm_90 alone: without a GPU it only checks that the
  # kernels compile, and each architecture is a full device-code pass).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # CMake 3.25 (Debian 12) predates nvcc's C++20 mode; the engine headers the kernels include
  # are C++20, so teach CMake the flag when it does not know it.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  find_package(CUDAToolkit REQUIRED)
endif()

# Adds the .cu files of cuda/ to a target. Until the CUDA backend lands, cuda/ may hold nothing;
# the option and the toolchain detection are already in place.
function(lsf_add_cuda_backend target)
  file(GLOB cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cuda/*.cu ${PROJECT_SOURCE_DIR}/cuda/*.cpp)
  # NCCL (shipped with the toolkit) backs data-parallel training on GPUs
  # (cuda/nccl_process_group.cu); without it that one file is left out.
  find_path(LSF_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(LSF_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  if(NOT LSF_NCCL_INCLUDE_DIR OR NOT LSF_NCCL_LIBRARY)
    message(STATUS "lsformer: NCCL not found, building the CUDA backend without data-parallel GPU training")
    list(FILTER cuda_sources EXCLUDE REGEX "/cuda/nccl_process_group\\.cu$")
  endif()
  # The .cu files built, for tests/CMakeLists.txt's launch-resource check.
  set(cu_sources ${cuda_sources})
  list(FILTER cu_sources INCLUDE REGEX "\\.cu$")
  set_property(GLOBAL PROPERTY LSF_CUDA_KERNEL_SOURCES ${cu_sources})
  if(cuda_sources)
    target_sources(${target} PRIVATE ${cuda_sources})
    if(LSF_NCCL_INCLUDE_DIR AND LSF_NCCL_LIBRARY)
      target_include_directories(${target} PRIVATE ${LSF_NCCL_INCLUDE_DIR})
      target_link_libraries(${target} PRIVATE ${LSF_NCCL_LIBRARY})
    endif()
    set_target_properties(${target} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
                                               CUDA_SEPARABLE_COMPILATION OFF)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
    target_link_libraries(${target} PRIVATE CUDA::cudart CUDA::cublas)
    target_compile_definitions(${target} PRIVATE LSF_WITH_CUDA=1)
  endif()
endfunction()
