// The MPI backend of engine/distributed.h: host tensors over MPI (Debian's Open MPI). Compiled
// only when CMake finds MPI (LSF_MPI=AUTO|ON); it installs its factory at load time, so the rest
// of the library never includes mpi.h.
//
// MPI is initialised on first use with MPI_THREAD_FUNNELED (only the main thread calls MPI; the
// OpenMP workers never do) and finalised by a static destructor at exit. The group works on a
// duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so a failing call is an lsf::Error naming
// it. Non-blocking collectives are polled with MPI_Test: Open MPI progresses them only inside
// MPI calls, and polling is what lets a wait give up after collective_timeout() when a peer has
// died under a launcher that does not end the job itself.
#include <mpi.h>

#include <climits>
#include <cstring>
#include <sstream>

#include "lsformer/engine/distributed.h"
#include "lsformer/engine/error.h"

namespace lsf::dist {
namespace {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, size_t(length));
}

#define LSF_MPI_CHECK(call)                                                                       \
  do {                                                                                            \
    const int lsf_mpi_rc_ = (call);                                                               \
    LSF_CHECK(lsf_mpi_rc_ == MPI_SUCCESS) << #call << " failed: " << mpi_error_string(lsf_mpi_rc_); \
  } while (0)

MPI_Datatype mpi_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I64: return MPI_INT64_T;
    case DType::I32: return MPI_INT32_T;
    case DType::U8: return MPI_UINT8_T;
    default: break;
  }
  LSF_FAIL() << "dist::" << op << " (mpi): dtype " << dtype << " is not supported on host tensors (f32, f64, i64, i32, u8)";
}

// Initialises MPI once and finalises it at exit (unless the program did either itself).
struct MpiSession {
  bool owned = false;
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    LSF_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    owned = true;
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !finalized) MPI_Finalize();
  }
};

void check_tensor(const Tensor& t, const char* op) {
  LSF_CHECK(t.defined()) << "dist::" << op << " (mpi): undefined tensor";
  LSF_CHECK(t.device().is_cpu()) << "dist::" << op << " (mpi): the tensor is on " << t.device()
                                 << "; the MPI group reduces host tensors (CUDA tensors go through NCCL: dist::gradient_group)";
  LSF_CHECK(t.is_contiguous()) << "dist::" << op << " (mpi): the tensor of shape " << t.shape() << " is not contiguous";
  LSF_CHECK(t.numel() <= INT_MAX) << "dist::" << op << " (mpi): " << t.numel() << " elements exceed MPI's int count";
}

class MpiWork final : public Work {
 public:
  MpiWork(MPI_Request request, Tensor t, ReduceOp op, int size, int rank)
      : request_(request), tensor_(std::move(t)), op_(op), size_(size), rank_(rank) {}
  ~MpiWork() override {
    // A request abandoned after a timeout stays with MPI (freeing it would let MPI write into a
    // buffer that may be gone); the job is about to end in that case.
    if (!done_ && request_ != MPI_REQUEST_NULL) MPI_Request_free(&request_);
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    LSF_MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
    if (flag) finish();
    return done_;
  }
  void wait(double timeout_s, const std::string& what) override {
    detail::poll_until([&] { return test(); }, timeout_s, [&] {
      std::ostringstream os;
      os << what << " did not complete within " << timeout_s << " s on rank " << rank_ << " of " << size_
         << ": another rank has stopped (it died, hangs, or ran a different sequence of collectives); "
            "LSF_DIST_TIMEOUT sets the wait in seconds";
      return os.str();
    });
  }

 private:
  void finish() {
    done_ = true;
    if (op_ != ReduceOp::Average || size_ == 1) return;
    if (tensor_.dtype() == DType::F32) {
      float* p = tensor_.data_ptr<float>();
      const float scale = 1.0f / float(size_);
      for (int64_t i = 0, n = tensor_.numel(); i < n; ++i) p[i] *= scale;
    } else {
      double* p = tensor_.data_ptr<double>();
      const double scale = 1.0 / double(size_);
      for (int64_t i = 0, n = tensor_.numel(); i < n; ++i) p[i] *= scale;
    }
  }
  MPI_Request request_;
  Tensor tensor_;
  ReduceOp op_;
  int size_, rank_;
  bool done_ = false;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup() {
    static MpiSession session;
    LSF_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    LSF_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    LSF_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    LSF_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    MPI_Comm local;
    LSF_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    LSF_MPI_CHECK(MPI_Comm_size(local, &local_size_));
    MPI_Comm_free(&local);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  const char* backend() const override { return "mpi"; }
  bool supports(Device device) const override { return device.is_cpu(); }

  std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op) override {
    check_tensor(t, "allreduce");
    LSF_CHECK(op == ReduceOp::Sum || t.dtype() == DType::F32 || t.dtype() == DType::F64)
        << "dist::allreduce (mpi): an average needs f32 or f64, got " << t.dtype();
    MPI_Request request = MPI_REQUEST_NULL;
    LSF_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), mpi_type(t.dtype(), "allreduce"), MPI_SUM,
                                 comm_, &request));
    return std::make_unique<MpiWork>(request, t, op, size_, rank_);
  }

  void broadcast(const Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    LSF_CHECK(root >= 0 && root < size_) << "dist::broadcast (mpi): root " << root << " is not a rank of " << size_;
    wait_for(MPI_Ibcast(t.raw_data(), int(t.nbytes()), MPI_BYTE, root, comm_, &pending_), "broadcast");
  }

  void broadcast_bytes(std::string& bytes, int root) override {
    LSF_CHECK(root >= 0 && root < size_) << "dist::broadcast_bytes (mpi): root " << root << " is not a rank of " << size_;
    int64_t length = int64_t(bytes.size());
    wait_for(MPI_Ibcast(&length, 1, MPI_INT64_T, root, comm_, &pending_), "broadcast of a length");
    LSF_CHECK(length <= INT_MAX) << "dist::broadcast_bytes (mpi): " << length << " bytes exceed MPI's int count";
    bytes.resize(size_t(length));
    if (length > 0) wait_for(MPI_Ibcast(bytes.data(), int(length), MPI_CHAR, root, comm_, &pending_), "broadcast of bytes");
  }

  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  // Broadcasts wait without a time limit: rank 0 may be evaluating or writing a checkpoint for
  // minutes while the others wait for its result. A dead rank 0 is the launcher's to report.
  void wait_for(int rc, const char* what) {
    LSF_CHECK(rc == MPI_SUCCESS) << "dist::" << what << " (mpi) failed: " << mpi_error_string(rc);
    detail::poll_until(
        [&] {
          int flag = 0;
          LSF_MPI_CHECK(MPI_Test(&pending_, &flag, MPI_STATUS_IGNORE));
          return flag != 0;
        },
        /*timeout_s=*/0, [] { return std::string(); });
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request pending_ = MPI_REQUEST_NULL;
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

std::shared_ptr<ProcessGroup> make_mpi_world() { return std::make_shared<MpiProcessGroup>(); }

const bool registered = [] {
  detail::set_mpi_world_factory(&make_mpi_world);
  return true;
}();

}  // namespace
}  // namespace lsf::dist
