// The NCCL backend of engine/distributed.h: all-reduces of device tensors between the ranks of
// a bootstrap group (the MPI world), one GPU per rank. Compiled with the CUDA backend (the
// toolkit ships nccl.h and libnccl); installed at load time, so engine/ never includes NCCL.
//
// Bootstrap: rank 0 makes an ncclUniqueId and broadcasts its bytes through the bootstrap group;
// every rank then joins with ncclCommInitRank(size, id, rank) on its device.
//
// Streams: collectives run on a dedicated non-blocking stream of this group, so that they overlap
// the backward kernels that keep running on lsformer's compute stream (cuda/runtime.cuh
// current_stream()). A launch records an event on the compute stream (the bucket's gradients are
// written) and makes the communication stream wait on it; the collective's completion is another
// event, which wait() makes the compute stream wait on (the optimizer then reads the reduced
// values in order) after polling it from the host, with ncclCommGetAsyncError, so that a dead
// peer becomes an error after the timeout (the communicator is aborted) instead of a hang.
// Gradients may be f32, bf16, f16 or f64; ReduceOp::Average is NCCL's ncclAvg.
#include <nccl.h>

#include <cstring>
#include <sstream>

#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/distributed.h"
#include "lsformer/engine/error.h"

namespace lsf::dist {
namespace {

#define LSF_NCCL_CHECK(call)                                                                          \
  do {                                                                                                \
    const ncclResult_t lsf_nccl_rc_ = (call);                                                         \
    LSF_CHECK(lsf_nccl_rc_ == ncclSuccess) << #call << " failed: " << ncclGetErrorString(lsf_nccl_rc_); \
  } while (0)

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I64: return ncclInt64;
    case DType::I32: return ncclInt32;
    case DType::U8: return ncclUint8;
    default: break;
  }
  LSF_FAIL() << "dist::allreduce (nccl): dtype " << dtype << " is not supported";
  return ncclFloat32;  // unreachable: LSF_FAIL throws
}

void check_tensor(const Tensor& t, int device, const char* op) {
  LSF_CHECK(t.defined()) << "dist::" << op << " (nccl): undefined tensor";
  LSF_CHECK(t.device().is_cuda() && t.device().index == device)
      << "dist::" << op << " (nccl): the tensor is on " << t.device() << ", the communicator on cuda:" << device;
  LSF_CHECK(t.is_contiguous()) << "dist::" << op << " (nccl): the tensor of shape " << t.shape() << " is not contiguous";
}

class NcclWork final : public Work {
 public:
  NcclWork(ncclComm_t comm, cudaEvent_t done, int device, int rank, int size)
      : comm_(comm), done_(done), device_(device), rank_(rank), size_(size) {}
  ~NcclWork() override { cudaEventDestroy(done_); }
  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaSuccess) return true;
    LSF_CHECK(status == cudaErrorNotReady) << "dist::allreduce (nccl): " << cudaGetErrorString(status);
    ncclResult_t async = ncclSuccess;
    LSF_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    LSF_CHECK(async == ncclSuccess) << "dist::allreduce (nccl): the communicator failed: " << ncclGetErrorString(async);
    return false;
  }
  void wait(double timeout_s, const std::string& what) override {
    cuda::DeviceGuard guard(device_);
    try {
      detail::poll_until([&] { return test(); }, timeout_s, [&] {
        std::ostringstream os;
        os << what << " did not complete within " << timeout_s << " s on rank " << rank_ << " of " << size_
           << " (nccl): another rank has stopped; LSF_DIST_TIMEOUT sets the wait in seconds";
        return os.str();
      });
    } catch (...) {
      ncclCommAbort(comm_);  // frees the kernels stuck waiting for the dead peer
      throw;
    }
    LSF_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done_, 0));
  }

 private:
  ncclComm_t comm_;
  cudaEvent_t done_;
  int device_, rank_, size_;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(ProcessGroup& bootstrap, Device device)
      : rank_(bootstrap.rank()), size_(bootstrap.size()), local_size_(bootstrap.local_size()), device_(device.index) {
    int count = 0;
    LSF_CHECK(cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
        << "dist (nccl): rank " << rank_ << " sees no CUDA device";
    LSF_CHECK(device_ >= 0 && device_ < count) << "dist (nccl): rank " << rank_ << " has no device cuda:" << device_
                                               << " (" << count << " visible)";
    ncclUniqueId id;
    std::string bytes;
    if (rank_ == 0) {
      LSF_NCCL_CHECK(ncclGetUniqueId(&id));
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    bootstrap.broadcast_bytes(bytes, 0);
    LSF_CHECK(bytes.size() == sizeof(id)) << "dist (nccl): received a unique id of " << bytes.size() << " bytes, expected "
                                          << sizeof(id);
    std::memcpy(&id, bytes.data(), sizeof(id));
    cuda::DeviceGuard guard(device_);
    LSF_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    LSF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclProcessGroup() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  const char* backend() const override { return "nccl"; }
  bool supports(Device device) const override { return device.is_cuda() && device.index == device_; }

  std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op) override {
    check_tensor(t, device_, "allreduce");
    cuda::DeviceGuard guard(device_);
    cudaEvent_t done = order_after_compute();
    LSF_NCCL_CHECK(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_type(t.dtype()),
                                 op == ReduceOp::Average ? ncclAvg : ncclSum, comm_, stream_));
    LSF_CUDA_CHECK(cudaEventRecord(done, stream_));
    return std::make_unique<NcclWork>(comm_, done, device_, rank_, size_);
  }

  void broadcast(const Tensor& t, int root) override {
    check_tensor(t, device_, "broadcast");
    LSF_CHECK(root >= 0 && root < size_) << "dist::broadcast (nccl): root " << root << " is not a rank of " << size_;
    cuda::DeviceGuard guard(device_);
    cudaEvent_t done = order_after_compute();
    LSF_NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.nbytes()), ncclUint8, root, comm_, stream_));
    LSF_CUDA_CHECK(cudaEventRecord(done, stream_));
    NcclWork(comm_, done, device_, rank_, size_).wait(/*timeout_s=*/0, "broadcast");
  }

  void broadcast_bytes(std::string& bytes, int root) override {
    LSF_FAIL() << "dist::broadcast_bytes (nccl): host bytes go through the bootstrap (MPI) group";
    (void)bytes, (void)root;
  }
  void abort(int code) override {
    if (comm_) ncclCommAbort(comm_), comm_ = nullptr;
    std::exit(code);
  }

 private:
  // An event for the collective's completion, after making the communication stream wait for
  // everything queued so far on the compute stream (the tensor's producers).
  cudaEvent_t order_after_compute() {
    cudaEvent_t ready, done;
    LSF_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    LSF_CUDA_CHECK(cudaEventRecord(ready, cuda::current_stream()));
    LSF_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
    LSF_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait is satisfied
    LSF_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    return done;
  }
  int rank_, size_, local_size_, device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

std::shared_ptr<ProcessGroup> make_nccl_group(ProcessGroup& bootstrap, Device device) {
  return std::make_shared<NcclProcessGroup>(bootstrap, device);
}

const bool registered = [] {
  detail::set_nccl_factory(&make_nccl_group);
  return true;
}();

}  // namespace
}  // namespace lsf::dist
