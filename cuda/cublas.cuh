// Internal to cuda/: the one cuBLAS wrapper. A handle per device, created on first use, bound to
// that device's current_stream() and given a workspace from the device allocator, so cuBLAS
// never allocates behind the caching allocator's back and its work is ordered with ours.
//
//   cublas::gemm_strided_batched(dtype, {...});
#pragma once

#include <cublas_v2.h>

#include "lsformer/cuda/runtime.cuh"

// Any cuBLAS call that fails becomes an lsf::Error naming the call and cuBLAS's status.
#define LSF_CUBLAS_CHECK(expr)                                                                     \
  do {                                                                                             \
    cublasStatus_t lsf_cublas_status_ = (expr);                                                    \
    LSF_CHECK(lsf_cublas_status_ == CUBLAS_STATUS_SUCCESS)                                         \
        << #expr << " failed: " << cublasGetStatusName(lsf_cublas_status_) << " ("                 \
        << cublasGetStatusString(lsf_cublas_status_) << ")";                                       \
  } while (0)

namespace lsf::cuda::cublas {

// The current device's handle, bound to current_stream().
cublasHandle_t handle();

// One column-major strided-batched GEMM, C_i = alpha·op(A_i)·op(B_i) + beta·C_i for
// i < batch (cuBLAS's conventions: m×n result, k the contraction, leading dimensions and
// element strides between batch matrices; a stride of 0 reuses one matrix for every i).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  bool c_f32 = false;  // bf16/f16 A and B with an f32 C (partial sums that are rounded once later)
};
// f32 (TF32 tensor cores only when lsf::cuda::allow_tf32()), f64, and bf16/f16 inputs and
// outputs with f32 accumulation (C in f32 too when args.c_f32); other dtypes throw.
void gemm_strided_batched(DType dtype, const GemmArgs& args);

}  // namespace lsf::cuda::cublas
