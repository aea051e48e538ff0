// The device error flag of cuda/kb_common.cuh: one 8-byte word per device, allocated on first
// use and kept for the life of the process (like the per-device streams of runtime.cu).
#include <array>

#include "lsformer/cuda/kb_common.cuh"

namespace lsf::cuda::kb {

namespace {

constexpr int kMaxDevices = 64;

struct FlagSlot {
  std::mutex mutex;
  unsigned long long* ptr = nullptr;
};

FlagSlot& slot(int device) {
  static std::array<FlagSlot, kMaxDevices> slots;
  LSF_CHECK(device >= 0 && device < kMaxDevices) << "CUDA device index " << device << " out of range";
  return slots[size_t(device)];
}

}  // namespace

ErrorFlag::ErrorFlag(int device) {
  FlagSlot& s = slot(device);
  lock_ = std::unique_lock<std::mutex>(s.mutex);
  if (s.ptr == nullptr) LSF_CUDA_CHECK(cudaMalloc(&s.ptr, sizeof(unsigned long long)));
  flag_ = s.ptr;
  // All bytes 0xff = kNoError.
  LSF_CUDA_CHECK(cudaMemsetAsync(flag_, 0xff, sizeof(unsigned long long), current_stream()));
}

ErrorFlag::~ErrorFlag() = default;

unsigned long long ErrorFlag::read() const {
  unsigned long long value = kNoError;
  cudaStream_t stream = current_stream();
  LSF_CUDA_CHECK(cudaMemcpyAsync(&value, flag_, sizeof(value), cudaMemcpyDeviceToHost, stream));
  LSF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

int64_t read_index(const Tensor& index, int64_t position) {
  cudaStream_t stream = current_stream();
  const char* base = static_cast<const char*>(index.raw_data()) + position * int64_t(index.element_size());
  int64_t value = 0;
  if (index.dtype() == DType::I32) {
    int32_t v = 0;
    LSF_CUDA_CHECK(cudaMemcpyAsync(&v, base, sizeof(v), cudaMemcpyDeviceToHost, stream));
    LSF_CUDA_CHECK(cudaStreamSynchronize(stream));
    value = v;
  } else {
    LSF_CUDA_CHECK(cudaMemcpyAsync(&value, base, sizeof(value), cudaMemcpyDeviceToHost, stream));
    LSF_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return value;
}

}  // namespace lsf::cuda::kb
