// Anomaly mode (engine/anomaly.h, issue #15): the backward pass names the op that first
// returned a NaN or an infinity and the module it ran in (its dotted path), the forward pass
// names the op that first produced a NaN, and with the mode off nothing is checked or recorded.
// A two-layer toy model (encoder.layers.{0,1}) where layer 1's sqrt sees an exact 0: finite in
// forward, infinite gradient in backward.
#include "helpers.h"
#include "lsformer/engine/anomaly.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/module_list.h"

using namespace lsf;
using Catch::Contains;

namespace {

// y = sqrt(proj(x)² + offset) (or log(proj(x)) with use_log): with offset 0 and a zero
// projection the forward value is 0 and the backward of sqrt divides by 0.
class Layer final : public nn::Module {
 public:
  Layer(double weight, double offset, bool use_log) : Module("Layer"), offset_(offset), use_log_(use_log) {
    proj = register_module("proj", std::make_shared<nn::Linear>(3, 3));
    NoGradGuard no_grad;
    proj->weight.fill_(weight);
    proj->bias.fill_(0.0);
  }
  Tensor forward(const Tensor& x) {  // [B, 3] -> [B, 3]
    nn::ModuleScope call_site(*this);
    const Tensor y = proj->forward(x);
    if (use_log_) return lsf::log(y);
    return lsf::sqrt(add(mul(y, y), offset_));
  }
  std::shared_ptr<nn::Linear> proj;

 private:
  double offset_;
  bool use_log_;
};

class Encoder final : public nn::Module {
 public:
  explicit Encoder(bool log_in_layer1) : Module("Encoder") {
    layers = register_module("layers", std::make_shared<nn::ModuleList>());
    layers->push_back(std::make_shared<Layer>(0.5, 1.0, false));
    layers->push_back(std::make_shared<Layer>(log_in_layer1 ? -0.5 : 0.0, 0.0, log_in_layer1));
  }
  Tensor forward(const Tensor& x) {  // [B, 3]
    nn::ModuleScope call_site(*this);
    Tensor h = x;
    for (size_t i = 0; i < layers->size(); ++i) h = layers->at<Layer>(i)->forward(h);
    return h;
  }
  std::shared_ptr<nn::ModuleList> layers;
};

class Root final : public nn::Module {
 public:
  explicit Root(bool log_in_layer1 = false) : Module("Root") {
    encoder = register_module("encoder", std::make_shared<Encoder>(log_in_layer1));
  }
  Tensor loss(const Tensor& x) { return sum(encoder->forward(x)); }
  std::shared_ptr<Encoder> encoder;
};

Tensor input() { return tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}); }

}  // namespace

TEST_CASE("module paths compose from registration", "[anomaly]") {
  Root root;
  CHECK(root.path().empty());
  CHECK(root.encoder->path() == "encoder");
  CHECK(root.encoder->layers->at<Layer>(1)->proj->path() == "encoder.layers.1.proj");
}

TEST_CASE("anomaly mode names the op and module whose backward first returns Inf", "[anomaly]") {
  Root root;
  CHECK_FALSE(autograd::anomaly_mode_enabled());
  {
    autograd::AnomalyMode anomaly;
    CHECK(autograd::anomaly_mode_enabled());
    const Tensor h = root.encoder->forward(input());
    CHECK(h.grad_fn()->call_site() == "encoder.layers.1 (Layer)");  // the innermost module's path
    const Tensor loss = sum(h);  // finite: sqrt(0) = 0
    CHECK(std::isfinite(loss.item<double>()));
    CHECK(loss.grad_fn()->call_site().empty());  // outside every module
    CHECK_THROWS_WITH(loss.backward(), Contains("anomaly: the backward of 'sqrt'") &&
                                           Contains("forward call site: encoder.layers.1 (Layer)") &&
                                           Contains("Inf (6 of 6 values") && Contains("input 0 of shape {2, 3}"));
  }
  CHECK_FALSE(autograd::anomaly_mode_enabled());  // the scope restores the mode
}

TEST_CASE("anomaly mode names the op whose forward first produces a NaN", "[anomaly]") {
  Root root(/*log_in_layer1=*/true);  // layer 1: log of a negative projection
  autograd::AnomalyMode anomaly;
  CHECK_THROWS_WITH(root.loss(input()), Contains("anomaly: the forward of 'log'") &&
                                            Contains("forward call site: encoder.layers.1 (Layer)") &&
                                            Contains("NaN (6 of 6 values"));
}

TEST_CASE("anomaly mode off: nothing is recorded, checked or raised", "[anomaly]") {
  Root root;
  const Tensor loss = root.loss(input());
  CHECK(loss.grad_fn()->call_site().empty());  // no call sites are computed
  REQUIRE_NOTHROW(loss.backward());
  // The non-finite gradients reach the parameters unreported (what the trainer's check and
  // train.non_finite are for).
  const Tensor g = root.encoder->layers->at<Layer>(1)->proj->weight.grad();
  CHECK_FALSE(autograd::describe_non_finite(g).empty());
  CHECK(autograd::current_call_site().empty());
}

TEST_CASE("describe_non_finite counts NaN and Inf and ignores Inf when asked", "[anomaly]") {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor t = tensor(std::vector<double>{1, inf, std::nan(""), -inf}, {4});
  CHECK(autograd::describe_non_finite(t) == "NaN and Inf (3 of 4 values, first at flat index 1: inf)");
  CHECK(autograd::describe_non_finite(t, /*nan_only=*/true) == "NaN (1 of 4 values, first at flat index 2: nan)");
  CHECK(autograd::describe_non_finite(tensor(std::vector<float>{1, 2}, {2})).empty());
}
