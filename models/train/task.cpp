// The task registry and the small value types of the Task interface (see task.h).
#include "lsformer/models/train/task.h"

#include <algorithm>
#include <map>

#include "lsformer/engine/error.h"
#include "lsformer/models/nn/init.h"

namespace lsf::train {
namespace {

// Built on first use, so families may register from any static initialiser.
std::map<std::string, TaskFamily>& registry() {
  static std::map<std::string, TaskFamily> families;  // by data.task value
  return families;
}

}  // namespace

void Tally::add(const std::string& name, double value) {
  for (auto& [n, v] : entries_)
    if (n == name) {
      v += value;
      return;
    }
  entries_.emplace_back(name, value);
}

double Tally::get(const std::string& name) const {
  for (const auto& [n, v] : entries_)
    if (n == name) return v;
  return 0.0;
}

bool EvalResult::has(const std::string& name) const {
  return std::any_of(metrics.begin(), metrics.end(), [&](const Metric& m) { return m.name == name; });
}

double EvalResult::metric(const std::string& name) const {
  std::string present;
  for (const Metric& m : metrics) {
    if (m.name == name) return m.value;
    present += (present.empty() ? "" : ", ") + m.name;
  }
  LSF_FAIL() << "the " << split << " evaluation has no metric '" << name << "' (it has: " << present << ")";
}

ModelSummary Task::summarize_model() {
  load_data({"train"});
  nn::init::SkipRandomInit skip;  // counting only
  std::shared_ptr<nn::Module> model = build_model();
  ModelSummary summary;
  summary.description = model->type_name();
  summary.parameters = model->parameter_count();
  return summary;
}

void Task::set_data_shard(const DataShard& shard) {
  LSF_CHECK(shard.world == 1) << "this task family does not support data-parallel training (its Task does not "
                                 "implement set_data_shard); run it as one process";
}

void Task::restore_state(const NamedTensors& tensors) {
  LSF_CHECK(tensors.empty()) << "this task keeps no state between steps, but the checkpoint holds task state '"
                             << tensors.front().first << "'";
}

MemoryEstimate Task::estimate_memory(MemoryUse) const { return {}; }

bool register_task_family(TaskFamily family) {
  LSF_CHECK(!family.tasks.empty()) << "register_task_family: family '" << family.name << "' serves no task";
  LSF_CHECK(family.default_sections && family.validate && family.check_data_paths && family.make)
      << "register_task_family: family '" << family.name << "' lacks a function";
  for (const std::string& t : family.tasks) {
    auto it = registry().find(t);
    LSF_CHECK(it == registry().end()) << "register_task_family: task '" << t << "' of family '" << family.name
                                      << "' is already served by family '" << it->second.name << "'";
  }
  for (const std::string& t : family.tasks) registry().emplace(t, family);
  return true;
}

const TaskFamily& task_family(const std::string& task) {
  auto it = registry().find(task);
  if (it == registry().end()) {
    std::string known;
    for (const auto& name : task_names()) known += (known.empty() ? "" : ", ") + name;
    LSF_FAIL() << "unknown task '" << task << "' (known: " << known << ")";
  }
  return it->second;
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& [name, family] : registry()) names.push_back(name);
  return names;  // std::map keeps them sorted
}

std::unique_ptr<Task> make_task(const RunConfig& config) { return task_family(config.task).make(config); }

ConfusionMatrix Task::confusion_matrix(nn::Module&, const std::string&) { return {}; }

int64_t Task::examples(const std::string&) const {
  LSF_FAIL() << "this task cannot run single examples for inspection (it implements no Task::examples)";
}

InspectedExample Task::forward_example(nn::Module&, const std::string&, int64_t) {
  LSF_FAIL() << "this task cannot run single examples for inspection (it implements no Task::forward_example)";
}

void check_device_supported(const Task& task, Device device, const RunConfig& config) {
  const std::string why = task.unsupported_device(device);
  LSF_CHECK(why.empty()) << "'train.device' is \"" << config.train.device << "\" but " << why
                         << "; --set train.device=cpu runs on the CPU";
}

}  // namespace lsf::train
