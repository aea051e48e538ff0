// The Task interface (models/train/task.h): the trainer hosts a family it has never heard of.
// A toy family registered here — a linear regression whose batches depend on state the task
// carries between steps, judged by a lower-is-better metric — trains through train::train and
// lsf eval's evaluate_checkpoint, resumes bit-identically (its state restored from the
// checkpoint), and has its own config sections checked strictly.
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

struct ToySections final : train::TaskSections {
  int64_t points = 64;     // data.points: examples per split
  double noise = 0.0;      // data.noise
  std::vector<double> weights;  // data.weights: a number list of any length (unused by the task)
  int64_t hidden = 4;      // model.hidden
  std::unique_ptr<train::TaskSections> clone() const override { return std::make_unique<ToySections>(*this); }
  void visit(train::FieldVisitor& v) override {
    v.field("data.points", points);
    v.field("data.noise", noise);
    v.field("data.weights", weights);
    v.field("model.hidden", hidden);
  }
};

// y = 3x + 1 on x in [−1, 1]; the training batch at step k starts where the carried counter
// says, so a resume that lost the counter would see other batches.
class ToyTask final : public train::Task {
 public:
  explicit ToyTask(const train::RunConfig& c) : config_(c), s_(c.sections_as<ToySections>()) {}

  void load_data(const std::vector<std::string>& splits) override {
    for (const auto& split : splits) LSF_CHECK(split == "train" || split == "dev" || split == "test") << "unknown split " << split;
    loaded_ = splits;
  }
  std::string describe_data() const override { return "toy regression"; }
  std::shared_ptr<nn::Module> build_model() override {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(1, s_.hidden));
    seq->push_back(std::make_shared<nn::Linear>(s_.hidden, 1));
    return seq;
  }
  train::TrainStep train_step(nn::Module& model, int64_t step) override {
    const int64_t start = int64_t(cursor_.item<double>());
    auto [x, y] = batch(start, config_.train.batch_size, /*split_offset=*/0);
    cursor_ = add(cursor_, double(config_.train.batch_size));  // state the trainer must carry
    Tensor pred = forward(model, x);
    train::TrainStep t;
    t.loss = mean(pow(sub(pred, y), 2));
    t.units = double(config_.train.batch_size);
    t.tally.add("sq_error", t.loss.item<float>() * double(config_.train.batch_size));
    t.tally.add("n", double(config_.train.batch_size));
    return t;
  }
  std::vector<train::Metric> window_metrics(const train::Tally& sums, int64_t) const override {
    return {{"mse", sums.get("sq_error") / sums.get("n"), train::Metric::Kind::Number, "mse"}};
  }
  const char* throughput_unit() const override { return "points"; }
  train::EvalResult evaluate(nn::Module& model, const std::string& split, int64_t) override {
    NoGradGuard no_grad;
    auto [x, y] = batch(0, s_.points, split == "dev" ? 1000 : 2000);
    train::EvalResult r;
    r.split = split;
    r.loss = mean(pow(sub(forward(model, x), y), 2)).item<float>();
    r.metrics = {{"mse", r.loss, train::Metric::Kind::Number, "mse"}, {"points", double(s_.points), train::Metric::Kind::Count, ""}};
    return r;
  }
  train::Selection selection() const override { return {"mse", /*higher_is_better=*/false}; }
  std::string describe(const train::EvalResult& r) const override {
    std::ostringstream os;
    os << "mse " << r.metric("mse");
    return os.str();
  }
  NamedTensors state() const override { return {{"cursor", cursor_}}; }
  void restore_state(const NamedTensors& tensors) override {
    LSF_CHECK(tensors.size() == 1 && tensors[0].first == "cursor") << "toy: unexpected task state";
    cursor_ = tensors[0].second.clone();
  }

 private:
  static Tensor forward(nn::Module& model, const Tensor& x) { return dynamic_cast<nn::Sequential&>(model).forward(x); }
  // Points start, start+1, ... of a split (offset keeps splits apart), x in [−1, 1).
  std::pair<Tensor, Tensor> batch(int64_t start, int64_t n, int64_t split_offset) const {
    std::vector<float> xs(n), ys(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = (start + i) * 7 + split_offset;
      xs[i] = float((k % 97) / 48.5 - 1.0);
      ys[i] = 3.0f * xs[i] + 1.0f + float(s_.noise * std::sin(double(k)));
    }
    return {tensor(xs, {n, 1}), tensor(ys, {n, 1})};
  }
  train::RunConfig config_;
  ToySections s_;
  std::vector<std::string> loaded_;
  Tensor cursor_ = zeros({}, kF64);
};

void check_toy(const std::string& source, const train::RunConfig& c) {
  const auto& s = c.sections_as<ToySections>();
  LSF_CHECK(s.points >= 1) << source << ": 'data.points' must be ≥ 1, got " << s.points;
}

[[maybe_unused]] const bool kToyRegistered =
    train::register_task_family(train::task_family_of<ToySections, ToyTask>("toy", {"toy_regression"}, check_toy));

const std::string kToy = R"({
  "data": {"task": "toy_regression", "points": 32},
  "model": {"hidden": 3},
  "optimizer": {"lr": 0.05},
  "schedule": {"name": "constant"},
  "train": {"steps": 30, "batch_size": 8, "eval_every": 10, "log_every": 5, "checkpoint_every": 5, "seed": 2, "threads": 1}
})";

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("task", name); }

}  // namespace

TEST_CASE("a family registered from outside the library trains, evaluates and resumes", "[train][task]") {
  const train::RunConfig config = train::parse_config(kToy);
  CHECK(config.sections_as<ToySections>().points == 32);
  CHECK(config.sections_as<ToySections>().hidden == 3);

  fs::path a = fresh_dir("a"), b = fresh_dir("b");
  std::ostringstream log;
  train::TrainSummary full = testing::run_training(config, a, log);
  INFO(log.str());
  REQUIRE(full.finished);
  // The task's own metric, lower is better: the best checkpoint is the lowest periodic mse.
  CHECK(full.dev.metric("mse") < 1.0);
  CHECK(full.dev.metric("points") == 32);
  CHECK_THAT(log.str(), Contains("mse ") && Contains("points/s") && Contains("dev mse"));
  train::EvalResult again = train::evaluate_checkpoint(full.best_checkpoint, "test");
  CHECK(again.metric("mse") == full.test.metric("mse"));
  CHECK(train::describe_result(full.best_checkpoint, again).rfind("mse ", 0) == 0);

  // Stop at step 15, move the RNG, resume: the same parameters as the uninterrupted run, which
  // needs the task's carried cursor back.
  testing::run_training(config, b, log, false, /*stop_after=*/15);
  SafetensorsContents stopped = load_safetensors((b / "last.safetensors").string());
  REQUIRE(stopped.tensors.count("task.cursor"));
  CHECK(stopped.tensors.at("task.cursor").item<double>() == 15 * 8);
  manual_seed(77);
  train::TrainSummary resumed = testing::run_training(config, b, log, /*resume=*/true);
  CHECK(resumed.finished);
  SafetensorsContents fa = load_safetensors((a / "last.safetensors").string());
  SafetensorsContents fb = load_safetensors((b / "last.safetensors").string());
  REQUIRE(fa.tensors.size() == fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) {
    INFO(name);
    REQUIRE(fb.tensors.count(name));
    CHECK(t.to_vector<double>() == fb.tensors.at(name).to_vector<double>());  // bit for bit
  }
  CHECK(resumed.test.metric("mse") == full.test.metric("mse"));
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("the family's sections are checked like the common ones", "[train][task]") {
  CHECK_THROWS_WITH(train::parse_config(kToy, {"model.window=4"}), Contains("--set: unknown key 'model.window'"));
  CHECK_THROWS_WITH(train::parse_config(R"({"data": {"task": "toy_regression", "path": "x"}})"), Contains("unknown key 'data.path'"));
  CHECK_THROWS_WITH(train::parse_config(kToy, {"data.points=0"}), Contains("'data.points' must be ≥ 1"));
  CHECK_THROWS_WITH(train::parse_config(kToy, {"data.noise=loud"}), Contains("'data.noise' must be a number"));
  // A number list takes any length (its default is empty), and only numbers.
  CHECK(train::parse_config(kToy).sections_as<ToySections>().weights.empty());
  CHECK(train::parse_config(kToy, {"data.weights=[1, 2.5, -3]"}).sections_as<ToySections>().weights ==
        std::vector<double>{1, 2.5, -3});
  CHECK(train::parse_config(kToy, {"data.weights=[0.5]"}).sections_as<ToySections>().weights == std::vector<double>{0.5});
  CHECK(train::parse_config(kToy, {"data.weights=[]"}).sections_as<ToySections>().weights.empty());
  CHECK_THROWS_WITH(train::parse_config(kToy, {"data.weights=[\"a\"]"}), Contains("'data.weights' must be an array of numbers"));
  CHECK_THROWS_WITH(train::parse_config(kToy, {"data.weights=3"}), Contains("'data.weights' must be an array of numbers"));
  {
    const train::RunConfig c = train::parse_config(kToy, {"data.weights=[0.25, 4]"});
    CHECK(train::parse_config(train::to_json(c)).sections_as<ToySections>().weights == std::vector<double>{0.25, 4});
  }
  // Switching the task with --set switches the schema: the toy's keys are unknown to ListOps.
  CHECK_THROWS_WITH(train::parse_config(kToy, {"data.task=listops"}), Contains("unknown key 'data.points'"));
  // Every registered task is listed when one is unknown.
  CHECK_THROWS_WITH(train::parse_config(R"({"data": {"task": "imagenet"}})"),
                    Contains("'data.task' must be one of") && Contains("toy_regression") && Contains("listops") &&
                        Contains("\"imagenet\""));
  CHECK_THROWS_WITH(train::parse_config(R"({"data": {"task": 3}})"), Contains("'data.task' must be a string"));
  // A family may not take a task name another one serves.
  CHECK_THROWS_WITH(train::register_task_family(train::task_family_of<ToySections, ToyTask>("copycat", {"listops"})),
                    Contains("'listops'") && Contains("already served by family 'lra'"));
  // The config of another family is not this one's.
  CHECK_THROWS_WITH(train::lra_sections(train::parse_config(kToy)), Contains("toy_regression"));
}
