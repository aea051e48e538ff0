// GradientReducer (gradient_reducer.h): bucket assignment, the gradient-ready hooks that fill and
// launch buckets in order, and the wait and write-back of finish().
#include "lsformer/models/dist/gradient_reducer.h"

#include <chrono>
#include <sstream>

#include "lsformer/engine/grad_hooks.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/ops/factory.h"
#include "lsformer/engine/error.h"

namespace lsf::dist {

GradientReducer::GradientReducer(std::shared_ptr<ProcessGroup> group, const NamedTensors& params,
                                 const ReducerOptions& options)
    : group_(std::move(group)), options_(options), params_(params) {
  LSF_CHECK(group_ != nullptr) << "GradientReducer: no process group";
  LSF_CHECK(options_.bucket_bytes >= 1) << "GradientReducer: bucket_bytes must be ≥ 1, got " << options_.bucket_bytes;
  LSF_CHECK(!params_.empty()) << "GradientReducer: no parameters to reduce";
  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  // Reverse registration order: the order backward makes the gradients final, roughly.
  Bucket current;
  int64_t numel = 0;
  auto close = [&] {
    if (current.params.empty()) return;
    const Tensor& first = params_[current.params.front()].second;
    current.flat = zeros({numel}, first.options());
    buckets_.push_back(std::move(current));
    current = Bucket{};
    numel = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& [name, p] = params_[k];
    LSF_CHECK(p.defined() && p.requires_grad() && !p.grad_fn())
        << "GradientReducer: parameter '" << name << "' is not a leaf that requires grad";
    LSF_CHECK(group_->supports(p.device())) << "GradientReducer: parameter '" << name << "' is on " << p.device()
                                            << ", which the " << group_->backend() << " group cannot reduce";
    if (!current.params.empty()) {
      const Tensor& first = params_[current.params.front()].second;
      if (first.dtype() != p.dtype() || first.device() != p.device()) close();
    }
    bucket_of_[k] = buckets_.size();
    slot_of_[k] = current.params.size();
    current.params.push_back(k);
    current.offsets.push_back(numel);
    numel += p.numel();
    current.bytes += int64_t(p.nbytes());
    if (current.bytes >= options_.bucket_bytes) close();
  }
  close();
  ready_.assign(params_.size(), false);
  pending_.assign(buckets_.size(), 0);
  work_.resize(buckets_.size());
  for (size_t k = 0; k < params_.size(); ++k)
    hook_ids_.push_back(autograd::add_grad_ready_hook(params_[k].second, [this, k](const Tensor&) { on_ready(k); }));
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < hook_ids_.size(); ++k) {
    try {
      autograd::remove_grad_ready_hook(params_[k].second, hook_ids_[k]);
    } catch (const Error&) {  // a destructor must not throw; the hook list is gone with its tensor
    }
  }
}

void GradientReducer::prepare() {
  LSF_CHECK(!armed_) << "GradientReducer::prepare: the previous backward pass was not finished (call finish())";
  armed_ = true;
  in_backward_ = true;
  ready_.assign(params_.size(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = int64_t(buckets_[b].params.size());
  next_launch_ = 0;
  for (auto& w : work_) w.reset();
  launched_in_backward_.clear();
}

void GradientReducer::on_ready(size_t k) {
  if (!armed_) return;  // a backward outside prepare() / finish(): not ours to reduce
  LSF_CHECK(!ready_[k]) << "GradientReducer: parameter '" << params_[k].first
                        << "' received two gradients in one pass (two backward calls between prepare() and finish()?)";
  ready_[k] = true;
  Bucket& bucket = buckets_[bucket_of_[k]];
  const Tensor& p = params_[k].second;
  bucket.flat.narrow(0, bucket.offsets[slot_of_[k]], p.numel()).copy_(p.grad().reshape({p.numel()}));
  --pending_[bucket_of_[k]];
  launch_full_buckets();
  for (size_t b = 0; b < next_launch_; ++b) work_[b]->test();  // progress the requests in flight
}

void GradientReducer::launch_full_buckets() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) {
    if (in_backward_) launched_in_backward_.push_back(next_launch_);
    launch(next_launch_++);
  }
}

void GradientReducer::launch(size_t b) { work_[b] = group_->allreduce_async(buckets_[b].flat, ReduceOp::Average); }

void GradientReducer::finish() {
  LSF_CHECK(armed_) << "GradientReducer::finish without prepare()";
  in_backward_ = false;
  // Parameters without a gradient in this pass: their current grad, or zeros.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (ready_[k]) continue;
    ready_[k] = true;
    Bucket& bucket = buckets_[bucket_of_[k]];
    const Tensor& p = params_[k].second;
    Tensor slot = bucket.flat.narrow(0, bucket.offsets[slot_of_[k]], p.numel());
    const Tensor g = p.grad();
    if (g.defined())
      slot.copy_(g.reshape({p.numel()}));
    else
      slot.copy_(zeros({p.numel()}, p.options()));
    --pending_[bucket_of_[k]];
  }
  launch_full_buckets();
  const auto started = std::chrono::steady_clock::now();
  const double timeout = options_.timeout_s > 0 ? options_.timeout_s : collective_timeout();
  // The exposed communication, as its own row of the profiler's table (lsf train --profile).
  profiler::OpScope op("gradient_allreduce_wait");
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::ostringstream what;
    what << "the gradient all-reduce of bucket " << b << " of " << buckets_.size() << " (" << buckets_[b].bytes << " bytes)";
    work_[b]->wait(timeout, what.str());
  }
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t k = 0; k < params_.size(); ++k) {
    const Bucket& bucket = buckets_[bucket_of_[k]];
    const Tensor& p = params_[k].second;
    const Tensor mean = bucket.flat.narrow(0, bucket.offsets[slot_of_[k]], p.numel()).view(p.shape());
    const Tensor g = p.grad();
    if (g.defined())
      g.copy_(mean);
    else
      p.set_grad(mean.clone());
  }
  armed_ = false;
}

}  // namespace lsf::dist
