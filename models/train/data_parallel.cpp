// DataParallel (data_parallel.h): the trainer's side of data-parallel training.
#include "lsformer/models/train/data_parallel.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "lsformer/engine/error.h"
#include "lsformer/engine/parallel.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/engine/random.h"
#include "lsformer/ops/factory.h"

namespace lsf::train {

DataParallel::DataParallel(std::shared_ptr<dist::ProcessGroup> world, const RunConfig& config, int64_t bucket_bytes)
    : world_(world ? std::move(world) : dist::single_process_group()), bucket_bytes_(bucket_bytes) {
  const int64_t B = config.train.batch_size, N = world_->size();
  LSF_CHECK(B % N == 0) << "'train.batch_size' (" << B << ") cannot be split over " << N
                        << " ranks: each rank computes an equal share of the global batch (the mean of the ranks' "
                           "gradients is the global batch's gradient only when every rank averages as many examples), "
                           "so the batch must be a multiple of "
                        << N << " (e.g. " << (B / N + 1) * N << ")";
  LSF_CHECK(bucket_bytes_ >= 1) << "the gradient bucket size must be ≥ 1 byte, got " << bucket_bytes_;
}

void DataParallel::apply_default_threads(const RunConfig& config) const {
  if (!active() || config.train.threads > 0 || std::getenv("OMP_NUM_THREADS")) return;
  set_num_threads(dist::default_threads_per_rank(*world_));
}

std::string DataParallel::broadcast_string(std::string s) const {
  world_->broadcast_bytes(s, 0);
  return s;
}

void DataParallel::broadcast_module(nn::Module& model) const {
  if (!active()) return;
  for (const auto& [name, t] : model.state_dict()) {
    dist::ProcessGroup& group = *dist::gradient_group(world_, t.device());
    if (t.is_contiguous()) {
      group.broadcast(t, 0);
    } else {
      const Tensor copy = t.contiguous();
      group.broadcast(copy, 0);
      t.copy_(copy);
    }
  }
}

void DataParallel::seed_rank_generator() const {
  if (rank() == 0) return;
  GeneratorState s = default_generator().state();
  // splitmix64 of (seed, rank): streams of different ranks share no Philox key.
  uint64_t z = s.seed + 0x9E3779B97F4A7C15ull * uint64_t(rank() + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  s.seed = z ^ (z >> 31);
  default_generator().set_state(s);
}

void DataParallel::attach(const nn::Module& model) {
  if (!active()) return;
  NamedTensors trainable;
  for (const auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) trainable.emplace_back(name, p);
  LSF_CHECK(!trainable.empty()) << "data-parallel training: the model has no trainable parameters";
  reducer_ = std::make_unique<dist::GradientReducer>(dist::gradient_group(world_, trainable.front().second.device()),
                                                     trainable, dist::ReducerOptions{.bucket_bytes = bucket_bytes_});
}

void DataParallel::before_backward() {
  if (reducer_) reducer_->prepare();
}

void DataParallel::after_backward() {
  if (reducer_) reducer_->finish();
}

void DataParallel::reduce_step(float& loss, TrainStep& step, bool& stop) const {
  if (!active()) return;
  const auto& entries = step.tally.entries();
  Tensor v = empty({int64_t(3 + entries.size())}, kF64);
  double* p = v.data_ptr<double>();
  p[0] = loss, p[1] = step.units, p[2] = stop ? 1.0 : 0.0;
  for (size_t i = 0; i < entries.size(); ++i) p[3 + i] = entries[i].second;
  profiler::OpScope op("step_stats_allreduce");
  world_->allreduce(v, dist::ReduceOp::Sum, "the all-reduce of the step's loss and counters");
  loss = float(p[0] / double(size()));
  step.units = p[1];
  stop = p[2] > 0;
  Tally summed;
  for (size_t i = 0; i < entries.size(); ++i) summed.add(entries[i].first, p[3 + i]);
  step.tally = summed;
}

EvalResult DataParallel::share(const EvalResult& result) const {
  if (!active()) return result;
  using nlohmann::json;
  std::string text;
  if (is_root()) {
    json metrics = json::array();
    for (const Metric& m : result.metrics) metrics.push_back({m.name, m.value, int(m.kind), m.label});
    text = json{{"split", result.split}, {"step", result.step}, {"loss", result.loss}, {"metrics", metrics}}.dump();
  }
  text = broadcast_string(text);
  const json j = json::parse(text);
  EvalResult r;
  r.split = j.at("split").get<std::string>();
  r.step = j.at("step").get<int64_t>();
  r.loss = j.at("loss").get<double>();
  for (const json& m : j.at("metrics"))
    r.metrics.push_back({m[0].get<std::string>(), m[1].get<double>(), Metric::Kind(m[2].get<int>()), m[3].get<std::string>()});
  return r;
}

NamedTensors DataParallel::join_state(const NamedTensors& local) const {
  if (!active()) return local;
  NamedTensors whole;
  for (const auto& [name, t] : local) {
    // Every rank's rows in a zero tensor of the whole batch, summed: x + 0 is x, exactly.
    const Tensor rows = t.to(kCPU).contiguous();
    const int64_t b = rows.size(0);
    Shape shape = rows.shape();
    shape[0] = b * size();
    Tensor all = zeros(shape, rows.options());
    all.narrow(0, b * rank(), b).copy_(rows);
    world_->allreduce(all, dist::ReduceOp::Sum, "the all-reduce joining task state '" + name + "'");
    whole.emplace_back(name, all);
  }
  return whole;
}

NamedTensors DataParallel::cut_state(const NamedTensors& whole) const {
  if (!active()) return whole;
  NamedTensors mine;
  for (const auto& [name, t] : whole) {
    LSF_CHECK(t.dim() >= 1 && t.size(0) % size() == 0)
        << "task state '" << name << "' of shape " << t.shape() << " does not split over " << size() << " ranks on dim 0";
    const int64_t b = t.size(0) / size();
    mine.emplace_back(name, t.narrow(0, b * rank(), b).contiguous());
  }
  return mine;
}

}  // namespace lsf::train
