// cuBLAS on the GPU: the one cuBLAS wrapper (cuda/cublas.cuh) and the CUDA gemm_kernel, which
// implements the batched, broadcasting, reducing contract of ops/matmul.h by the plan in
// cuda/gemm_plan.h (cublasGemmStridedBatchedEx calls, all on the device's stream).
//
// Dtypes: f32 (CUBLAS_COMPUTE_32F, or TF32 tensor cores when lsf::cuda::set_allow_tf32(true)),
// f64, and bf16/f16 inputs and outputs with f32 accumulation (CUBLAS_COMPUTE_32F); integer
// dtypes throw, as on the CPU.
#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "lsformer/cuda/cublas.cuh"
#include "lsformer/cuda/gemm_plan.h"
#include "lsformer/cuda/strided.cuh"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"
#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/storage.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/kernels/matmul.h"
#include "lsformer/ops/kernels/reduce.h"

namespace lsf::cuda {

namespace cublas {
namespace {

// cuBLAS's recommended workspace on Hopper; also ample for Ampere.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct DeviceHandle {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

}  // namespace

cublasHandle_t handle() {
  static std::mutex mutex;
  static std::array<DeviceHandle, 64> handles;  // never destroyed, like the streams
  const int device = current_device();
  LSF_CHECK(device >= 0 && device < 64) << "cuBLAS: device index " << device << " out of range";
  std::lock_guard<std::mutex> lock(mutex);
  DeviceHandle& h = handles[size_t(device)];
  if (h.handle == nullptr) {
    LSF_CUBLAS_CHECK(cublasCreate(&h.handle));
    // The stream first: cublasSetStream resets the workspace to cuBLAS's own pool.
    LSF_CUBLAS_CHECK(cublasSetStream(h.handle, current_stream()));
    h.workspace = allocator_for(DeviceType::CUDA).allocate(kWorkspaceBytes, Device(DeviceType::CUDA, device));
    LSF_CUBLAS_CHECK(cublasSetWorkspace(h.handle, h.workspace, kWorkspaceBytes));
  }
  return h.handle;
}

void gemm_strided_batched(DType dtype, const GemmArgs& g) {
  cudaDataType_t type;
  cublasComputeType_t compute;
  const float alpha_f = float(g.alpha), beta_f = float(g.beta);
  const void* alpha = &alpha_f;
  const void* beta = &beta_f;
  switch (dtype) {
    case DType::F32:
      type = CUDA_R_32F;
      compute = allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case DType::BF16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::F16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::F64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      alpha = &g.alpha;
      beta = &g.beta;
      break;
    default:
      LSF_FAIL() << "matmul: dtype " << dtype << " is not supported on CUDA (f32, f64, bf16 or f16)";
  }
  LSF_CHECK(!g.c_f32 || dtype == DType::BF16 || dtype == DType::F16)
      << "matmul: an f32 result for " << dtype << " operands is not a cuBLAS mode lsformer uses";
  const cudaDataType_t c_type = g.c_f32 ? CUDA_R_32F : type;
  LSF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle(), g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.m), int(g.n),
      int(g.k), alpha, g.a, type, int(g.lda), g.stride_a, g.b, type, int(g.ldb), g.stride_b, beta, g.c, c_type,
      int(g.ldc), g.stride_c, int(g.batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace cublas

namespace {

// c *= beta over any strides (the K = 0 case; bf16/f16 scale in float).
template <typename T>
__global__ void scale_strided_kernel(T* c, int64_t n, double beta, OffsetCalc<1> geo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t off = geo.get(i).v[0];
    if constexpr (std::is_same_v<T, double>) {
      c[off] = beta * c[off];
    } else {
      c[off] = convert<T>(float(beta) * convert<float>(c[off]));
    }
  }
}

void scale_inplace(const Tensor& c, double beta) {
  const int64_t n = c.numel();
  const auto geo = make_offset_calc<1>(c.shape(), {&c.strides()}, "matmul");
  dispatch_cuda(c.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || is_reduced_float_v<T>) {
      scale_strided_kernel<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(static_cast<T*>(c.raw_data()), n, beta, geo);
      LSF_CUDA_CHECK_LAUNCH("gemm scale");
    }
  });
}

// Issues the plan's cuBLAS calls for c = alpha·a·b + beta·c (c in f32 when c_f32: a and b are
// then bf16/f16).
void run_plan(const gemm_plan::Plan& plan, const Tensor& c, const Tensor& a, const Tensor& b, double alpha,
              double beta, bool c_f32) {
  const size_t es = dtype_size(a.dtype());
  char* const C_out = static_cast<char*>(c.raw_data());
  char* const A = static_cast<char*>(a.raw_data());
  char* const B = static_cast<char*>(b.raw_data());
  for (const gemm_plan::Call& call : plan.calls) {
    cublas::GemmArgs g;
    g.trans_a = call.trans_a;
    g.trans_b = call.trans_b;
    g.m = call.m;
    g.n = call.n;
    g.k = call.k;
    g.alpha = alpha;
    g.beta = call.accumulate ? 1.0 : beta;
    g.a = (call.a_is_b ? B : A) + call.a * int64_t(es);
    g.lda = call.lda;
    g.stride_a = call.stride_a;
    g.b = (call.a_is_b ? A : B) + call.b * int64_t(es);
    g.ldb = call.ldb;
    g.stride_b = call.stride_b;
    g.c = C_out + call.c * int64_t(c_f32 ? sizeof(float) : es);
    g.ldc = call.ldc;
    g.stride_c = call.stride_c;
    g.batch = call.batch;
    g.c_f32 = c_f32;
    cublas::gemm_strided_batched(a.dtype(), g);
  }
}

// bf16/f16 c with summed (expanded, stride-0) batch dims: the plan adds call after call into c
// (beta = 1), which would round the running sum to 16 bits after every call. Instead the
// products go to an f32 buffer of c's full shape, are summed over the expanded dims in f32, and
// c = alpha·Σ + beta·c is rounded to 16 bits once, as on the CPU. The buffer costs
// 4·numel(c's full shape) bytes; the common weight-gradient sums fold into K and never come here.
void gemm_16bit_summed(const Tensor& c, const Tensor& a, const Tensor& b, double alpha, double beta) {
  NoGradGuard no_grad;  // buffers and views of the kernel's own operands
  std::vector<bool> summed(size_t(c.dim()), false);
  Tensor c_real = c;  // c without its expanded dims: the elements it really holds
  for (int64_t d = 0; d + 2 < c.dim(); ++d) {
    if (c.strides()[size_t(d)] == 0 && c.shape()[size_t(d)] > 1) {
      summed[size_t(d)] = true;
      c_real = c_real.narrow(d, 0, 1);
    }
  }
  const Tensor products = empty(c.shape(), TensorOptions(kF32).device(c.device()));
  const gemm_plan::Plan plan =
      gemm_plan::make_plan(products.shape(), a.strides(), b.strides(), products.strides(), a.size(-1));
  run_plan(plan, products, a, b, alpha, 0.0, /*c_f32=*/true);
  const Tensor sum = empty(c_real.shape(), products.options());
  reduce_kernel(c.device(), ReduceOp::Sum, sum, products, summed);
  if (beta != 0.0) {
    const Tensor old = empty(c_real.shape(), products.options());
    copy_kernel(c.device(), old, c_real);
    if (beta != 1.0) scale_inplace(old, beta);
    add_inplace_kernel(c.device(), sum, old);
  }
  copy_kernel(c.device(), c_real, sum);
}

void gemm_cuda(const Tensor& c, const Tensor& a, const Tensor& b, double alpha, double beta) {
  const int64_t nd = c.dim();
  LSF_CHECK(nd >= 2 && a.dim() == nd && b.dim() == nd)
      << "gemm: expected operands of one rank ≥ 2, got shapes " << c.shape() << " = " << a.shape() << " · " << b.shape();
  LSF_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype())
      << "gemm: dtype mismatch (" << c.dtype() << " = " << a.dtype() << " · " << b.dtype() << ")";
  LSF_CHECK(a.device() == c.device() && b.device() == c.device())
      << "gemm: tensors on different devices (" << c.device() << " = " << a.device() << " · " << b.device() << ")";
  const int64_t K = a.size(-1);
  bool shapes_ok = a.size(-2) == c.size(-2) && b.size(-2) == K && b.size(-1) == c.size(-1);
  for (int64_t d = 0; d + 2 < nd; ++d) shapes_ok = shapes_ok && a.shape()[d] == c.shape()[d] && b.shape()[d] == c.shape()[d];
  LSF_CHECK(shapes_ok) << "gemm: shapes " << c.shape() << " = " << a.shape() << " · " << b.shape() << " do not match";
  const DType dtype = c.dtype();
  LSF_CHECK(dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16 || dtype == DType::F16)
      << "matmul: dtype " << dtype << " is not supported on CUDA (f32, f64, bf16 or f16)";
  if (c.numel() == 0) return;
  DeviceGuard guard(c.device().index);
  const gemm_plan::Plan plan = gemm_plan::make_plan(c.shape(), a.strides(), b.strides(), c.strides(), K);
  if (plan.calls.empty()) {
    // An empty sum (K = 0): c = beta·c, exactly 0 for beta = 0 even over NaN (as the CPU).
    if (beta == 0.0) {
      fill_kernel(c.device(), c, 0.0);
    } else if (beta != 1.0) {
      scale_inplace(c, beta);
    }
    return;
  }
  const bool sums_calls = std::any_of(plan.calls.begin(), plan.calls.end(), [](const gemm_plan::Call& call) {
    return call.accumulate;
  });
  if (sums_calls && (dtype == DType::BF16 || dtype == DType::F16)) {
    gemm_16bit_summed(c, a, b, alpha, beta);
    return;
  }
  run_plan(plan, c, a, b, alpha, beta, /*c_f32=*/false);
}

}  // namespace

LSF_REGISTER_KERNEL(gemm_kernel, DeviceType::CUDA, gemm_cuda);

}  // namespace lsf::cuda
