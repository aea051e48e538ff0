// RegionErrors: carries an exception out of an OpenMP parallel region to the calling thread.
//
// Why: an exception must not leave an OpenMP structured block; GCC's runtime calls
// std::terminate when one does. Inside a region a kernel can still throw: a per-thread
// workspace that fails to allocate (lsf::Error "out of CPU memory" from the allocator, or
// std::bad_alloc), or a nested kernel's argument check. Without this, such a failure on a
// worker thread would end the process instead of reaching the caller as an error.
//
// A region whose body can throw runs that body through run(). The first exception is kept
// (later ones are dropped); once one is kept, every run() on any thread returns at once, so
// the team finishes its loops quickly and still meets every barrier of the region (no hang);
// rethrow() raises the kept exception after the region. The outputs of a failed call are
// unspecified, as with any kernel that throws. Used by the CPU kernels (ops/cpu/) and by the
// data generators' parallel loops.
//
//   RegionErrors errors;
//   #pragma omp parallel
//   {
//     std::optional<Workspace> ws;
//     errors.run([&] { ws.emplace(sizes); });           // may throw on this thread
//   #pragma omp for
//     for (int64_t i = 0; i < n; ++i) errors.run([&] { work(*ws, i); });
//   }
//   errors.rethrow();
#pragma once

#include <atomic>
#include <exception>

namespace lsf {

class RegionErrors {
 public:
  // Runs fn() unless a run on some thread has already failed; catches what it throws.
  template <typename Fn>
  void run(Fn&& fn) noexcept {
    if (failed()) return;
    try {
      fn();
    } catch (...) {
      keep(std::current_exception());
    }
  }
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  // After the region (on the thread that opened it): throws the first kept exception, if any.
  void rethrow() const {
    if (failed()) std::rethrow_exception(first_);
  }

 private:
  void keep(std::exception_ptr error) noexcept {
    if (claimed_.exchange(true, std::memory_order_acq_rel)) return;  // not the first
    first_ = std::move(error);
    failed_.store(true, std::memory_order_release);
  }
  std::atomic<bool> claimed_{false}, failed_{false};
  std::exception_ptr first_;
};

}  // namespace lsf
