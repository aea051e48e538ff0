// Kernel tables: one function pointer per device type for each backend kernel.
//
// An op family declares its kernels with LSF_DECLARE_KERNEL in its internal kernel header
// (ops/kernels/<family>.h, not installed) and defines them with LSF_DEFINE_KERNEL in
// ops/<family>.cpp; each backend fills its slot with LSF_REGISTER_KERNEL from its own file
// (ops/cpu/<family>.cpp, cuda/<family>.cu), under the same name. Calling a kernel that a device
// lacks throws an lsf::Error naming kernel and device; a backend may also mark a kernel
// unsupported on purpose. tests/test_dispatch.cpp checks that every kernel is either
// implemented or marked on every built backend. Names and argument order follow one convention
// (docs/architecture.md, "Vocabulary"): <op>_forward_kernel / <op>_backward_kernel; a selector
// first, then outputs, incoming gradients, inputs and saved tensors, sizes, flags.
//
//   LSF_DECLARE_KERNEL(softmax_forward_kernel, void(bool log, const Tensor& y, const Tensor& x, int64_t dim));
//   softmax_forward_kernel(x.device(), /*log=*/false, y, x, dim);   // the first argument picks the backend
#pragma once

#include <string>
#include <vector>

#include "lsformer/engine/device.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"

namespace lsf {

class KernelBase {
 public:
  using AnyFn = void (*)();
  constexpr explicit KernelBase(const char* name) : name_(name) {}
  const char* name() const { return name_; }
  bool implemented(DeviceType t) const { return table_[int(t)] != nullptr; }
  bool marked_unsupported(DeviceType t) const { return unsupported_[int(t)]; }
  void mark_unsupported(DeviceType t) { unsupported_[int(t)] = true; }

 protected:
  [[noreturn]] void throw_missing(Device device) const;
  const char* name_;
  AnyFn table_[kNumDeviceTypes] = {};
  bool unsupported_[kNumDeviceTypes] = {};
};

template <typename Signature>
class Kernel;

template <typename R, typename... Args>
class Kernel<R(Args...)> : public KernelBase {
 public:
  using Fn = R (*)(Args...);
  constexpr explicit Kernel(const char* name) : KernelBase(name) {}
  void set(DeviceType t, Fn fn) { table_[int(t)] = reinterpret_cast<AnyFn>(fn); }
  template <typename... CallArgs>
  R operator()(Device device, CallArgs&&... args) const {
    AnyFn fn = table_[int(device.type)];
    if (fn == nullptr) throw_missing(device);
    if (profiler::enabled()) {  // every kernel call of every backend is timed here
      profiler::OpScope scope(name_);
      return reinterpret_cast<Fn>(fn)(std::forward<CallArgs>(args)...);
    }
    return reinterpret_cast<Fn>(fn)(std::forward<CallArgs>(args)...);
  }
};

// Every kernel defined in the library, for the coverage test and `lsf info`.
std::vector<KernelBase*>& all_kernels();

namespace detail {
struct KernelListEntry {
  explicit KernelListEntry(KernelBase* k) { all_kernels().push_back(k); }
};
}  // namespace detail

}  // namespace lsf

#define LSF_DECLARE_KERNEL(name, signature) extern ::lsf::Kernel<signature> name
#define LSF_DEFINE_KERNEL(name, signature)   \
  ::lsf::Kernel<signature> name{#name};      \
  static ::lsf::detail::KernelListEntry name##_list_entry_ { &name }
#define LSF_CONCAT_INNER_(a, b) a##b
#define LSF_CONCAT_(a, b) LSF_CONCAT_INNER_(a, b)
#define LSF_REGISTER_KERNEL(name, device_type, fn)                            \
  [[maybe_unused]] static const bool LSF_CONCAT_(name##_registered_, __LINE__) = \
      (name.set(device_type, fn), true)
#define LSF_MARK_UNSUPPORTED(name, device_type)                                 \
  [[maybe_unused]] static const bool LSF_CONCAT_(name##_unsupported_, __LINE__) = \
      (name.mark_unsupported(device_type), true)
