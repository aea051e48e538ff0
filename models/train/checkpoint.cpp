#include "lsformer/models/train/checkpoint.h"

#include <charconv>
#include <limits>

#include "lsformer/engine/info.h"

namespace lsf {
namespace {

constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kTaskPrefix = "task.";

uint64_t parse_u64(const Metadata& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  LSF_CHECK(it != meta.end()) << "load_checkpoint: '" << path << "' has no '" << key
                              << "' entry (not an lsformer training checkpoint?)";
  uint64_t value = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  LSF_CHECK(ec == std::errc() && end == s.data() + s.size())
      << "load_checkpoint: '" << path << "': entry '" << key << "' = '" << s << "' is not a non-negative integer";
  return value;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info) {
  LSF_CHECK(info.step >= 0) << "save_checkpoint: negative step " << info.step;
  NamedTensors tensors = model.state_dict();
  for (const auto& [name, t] : tensors)
    for (const char* reserved : {kOptimizerPrefix, kTaskPrefix})
      LSF_CHECK(name.rfind(reserved, 0) != 0) << "save_checkpoint: model tensor '" << name << "' collides with the '"
                                              << reserved << "' prefix reserved for optimizer and task state";
  GeneratorState rng = default_generator().state();
  Metadata meta = {{"format", "pt"},
                   {"lsformer.version", version()},
                   {"lsformer.step", std::to_string(info.step)},
                   {"lsformer.rng.seed", std::to_string(rng.seed)},
                   {"lsformer.rng.offset", std::to_string(rng.offset)}};
  if (!info.config.empty()) meta["lsformer.config"] = info.config;
  if (optimizer) {
    for (const auto& [name, t] : optimizer->state_tensors()) tensors.emplace_back(kOptimizerPrefix + name, t);
    meta["lsformer.optimizer"] = optimizer->state_json();
  }
  for (const auto& [name, t] : info.task_state) tensors.emplace_back(kTaskPrefix + name, t);
  for (const auto& [k, v] : info.extra) meta["extra." + k] = v;
  save_safetensors(path, tensors, meta);
}

CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer,
                               bool restore_rng) {
  SafetensorsContents file = load_safetensors(path);
  CheckpointInfo info;
  const uint64_t step = parse_u64(file.metadata, "lsformer.step", path);
  // 2^63 and above would turn negative as an int64_t step.
  LSF_CHECK(step <= uint64_t(std::numeric_limits<int64_t>::max()))
      << "load_checkpoint: '" << path << "': entry 'lsformer.step' = " << step << " is out of range (at most "
      << std::numeric_limits<int64_t>::max() << ")";
  info.step = int64_t(step);
  info.rng.seed = parse_u64(file.metadata, "lsformer.rng.seed", path);
  info.rng.offset = parse_u64(file.metadata, "lsformer.rng.offset", path);
  if (auto it = file.metadata.find("lsformer.config"); it != file.metadata.end()) info.config = it->second;
  for (const auto& [k, v] : file.metadata)
    if (k.rfind("extra.", 0) == 0) info.extra[k.substr(6)] = v;

  std::map<std::string, Tensor> weights, optimizer_state;
  for (auto& [name, t] : file.tensors) {
    if (name.rfind(kOptimizerPrefix, 0) == 0) {
      optimizer_state.emplace(name.substr(std::char_traits<char>::length(kOptimizerPrefix)), t);
    } else if (name.rfind(kTaskPrefix, 0) == 0) {
      info.task_state.emplace_back(name.substr(std::char_traits<char>::length(kTaskPrefix)), t);
    } else {
      weights.emplace(name, t);
    }
  }
  auto json = file.metadata.find("lsformer.optimizer");
  if (optimizer) {
    LSF_CHECK(json != file.metadata.end())
        << "load_checkpoint: '" << path << "' holds no optimizer state (saved without an optimizer?)";
  }
  // Check the model part first; the optimizer validates its part before changing anything;
  // so a mismatch anywhere leaves both untouched.
  nn::LoadReport report = model.check_state_dict(weights);
  LSF_CHECK(report.ok()) << "load_checkpoint: '" << path << "' does not match the model:\n" << report.str();
  if (optimizer) optimizer->load_state(optimizer_state, json->second);
  model.load_state_dict(weights, /*strict=*/true);
  if (restore_rng) default_generator().set_state(info.rng);
  return info;
}

}  // namespace lsf
