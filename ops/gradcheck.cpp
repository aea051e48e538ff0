#include "lsformer/ops/gradcheck.h"

#include <cmath>
#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"

namespace lsf::testing {
namespace {

// Address of element `flat` (row-major over the shape) of a CPU f64 tensor with any strides.
double* element(const Tensor& t, int64_t flat) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (flat % t.shape()[d]) * t.strides()[d];
    flat /= t.shape()[d];
  }
  return t.data_ptr<double>() + off;
}

// The floating outputs of fn, flattened into one f64 vector.
std::vector<double> evaluate(const MultiFn& fn, const TensorList& inputs) {
  NoGradGuard no_grad;
  std::vector<double> values;
  for (const Tensor& out : fn(inputs)) {
    if (!out.defined() || !is_floating(out.dtype())) continue;
    auto v = out.to_vector<double>();
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

bool close(double analytic, double numerical, const GradcheckOptions& o) {
  return std::fabs(analytic - numerical) <= o.atol + o.rtol * std::fabs(numerical);
}

}  // namespace

GradcheckResult gradcheck(const SingleFn& fn, const TensorList& inputs, const GradcheckOptions& options) {
  return gradcheck([&](const TensorList& in) { return TensorList{fn(in)}; }, inputs, options);
}

GradcheckResult gradcheck(const MultiFn& fn, const TensorList& inputs, const GradcheckOptions& options) {
  std::vector<size_t> checked;
  int64_t n_in = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    LSF_CHECK(inputs[i].dtype() == kF64 && inputs[i].device().is_cpu())
        << "gradcheck: input " << i << " is " << inputs[i].dtype() << " on " << inputs[i].device()
        << "; gradient checks need f64 CPU inputs";
    LSF_CHECK(inputs[i].is_leaf()) << "gradcheck: input " << i << " must be a leaf tensor";
    checked.push_back(i);
    n_in += inputs[i].numel();
  }
  LSF_CHECK(!checked.empty()) << "gradcheck: no input requires grad";

  TensorList outputs;
  TensorList float_outputs;
  outputs = fn(inputs);
  for (const Tensor& o : outputs)
    if (o.defined() && is_floating(o.dtype())) float_outputs.push_back(o);
  int64_t n_out = 0;
  for (const Tensor& o : float_outputs) n_out += o.numel();
  LSF_CHECK(n_out > 0) << "gradcheck: the function has no floating-point output";

  // Backward with the given output gradients; returns the gradient of every checked input.
  auto analytic = [&](const std::vector<double>& grad_out) {
    for (size_t i : checked) inputs[i].set_grad(Tensor());
    TensorList roots, grads;
    int64_t at = 0;
    for (const Tensor& o : float_outputs) {
      std::vector<double> g(grad_out.begin() + at, grad_out.begin() + at + o.numel());
      at += o.numel();
      if (!o.requires_grad()) continue;  // constant output: contributes nothing
      roots.push_back(o);
      grads.push_back(tensor(g, o.shape()).to(o.dtype()));
    }
    std::vector<std::vector<double>> result;
    if (!roots.empty()) autograd::run_backward(roots, grads, /*retain_graph=*/true);
    for (size_t i : checked) {
      Tensor g = inputs[i].grad();
      result.push_back(g.defined() ? g.to_vector<double>() : std::vector<double>(inputs[i].numel(), 0.0));
    }
    return result;
  };

  // Central difference of every output along direction `dir` (per checked input).
  auto numerical = [&](const std::vector<std::vector<double>>& dir) {
    auto shift = [&](double scale) {
      for (size_t c = 0; c < checked.size(); ++c) {
        const Tensor& t = inputs[checked[c]];
        for (int64_t k = 0; k < t.numel(); ++k)
          if (dir[c][k] != 0) *element(t, k) += scale * dir[c][k];
      }
    };
    shift(options.eps);
    std::vector<double> plus = evaluate(fn, inputs);
    shift(-2 * options.eps);
    std::vector<double> minus = evaluate(fn, inputs);
    shift(options.eps);
    std::vector<double> d(plus.size());
    for (size_t j = 0; j < d.size(); ++j) d[j] = (plus[j] - minus[j]) / (2 * options.eps);
    return d;
  };

  GradcheckResult result;
  std::ostringstream msg;
  int failures = 0;
  if (n_in * n_out <= options.max_jacobian_entries) {
    // Full Jacobian: row j analytic (backward of e_j), column k numerical (perturb x_k).
    std::vector<std::vector<std::vector<double>>> rows(n_out);
    for (int64_t j = 0; j < n_out; ++j) {
      std::vector<double> e(n_out, 0.0);
      e[j] = 1.0;
      rows[j] = analytic(e);
    }
    for (size_t c = 0; c < checked.size(); ++c) {
      const Tensor& t = inputs[checked[c]];
      for (int64_t k = 0; k < t.numel(); ++k) {
        std::vector<std::vector<double>> dir(checked.size());
        for (size_t cc = 0; cc < checked.size(); ++cc) dir[cc].assign(inputs[checked[cc]].numel(), 0.0);
        dir[c][k] = 1.0;
        std::vector<double> col = numerical(dir);
        for (int64_t j = 0; j < n_out; ++j) {
          double a = rows[j][c][k], n = col[j];
          if (!close(a, n, options)) {
            if (failures++ < 5)
              msg << "input " << checked[c] << " element " << k << ", output element " << j
                  << ": analytic " << a << " vs numerical " << n << "\n";
          }
        }
      }
    }
  } else {
    // Random projections uᵀ J v with unit u and v.
    Generator gen(options.seed);
    for (int p = 0; p < options.projections; ++p) {
      std::vector<double> u = randn({n_out}, TensorOptions(kF64), &gen).to_vector<double>();
      double un = 0;
      for (double x : u) un += x * x;
      for (double& x : u) x /= std::sqrt(un);
      std::vector<std::vector<double>> v(checked.size());
      double vn = 0;
      for (size_t c = 0; c < checked.size(); ++c) {
        v[c] = randn({inputs[checked[c]].numel()}, TensorOptions(kF64), &gen).to_vector<double>();
        for (double x : v[c]) vn += x * x;
      }
      for (auto& vc : v)
        for (double& x : vc) x /= std::sqrt(vn);
      auto g = analytic(u);
      double a = 0;
      for (size_t c = 0; c < checked.size(); ++c)
        for (size_t k = 0; k < v[c].size(); ++k) a += g[c][k] * v[c][k];
      std::vector<double> d = numerical(v);
      double n = 0;
      for (int64_t j = 0; j < n_out; ++j) n += u[j] * d[j];
      if (!close(a, n, options) && failures++ < 5)
        msg << "projection " << p << ": analytic uᵀJv " << a << " vs numerical " << n << "\n";
    }
  }
  for (size_t i : checked) inputs[i].set_grad(Tensor());
  if (failures > 0) {
    result.ok = false;
    result.message = "gradcheck failed (" + std::to_string(failures) + " mismatches; eps " +
                     std::to_string(options.eps) + ", atol " + std::to_string(options.atol) +
                     ", rtol " + std::to_string(options.rtol) + "):\n" + msg.str();
  }
  return result;
}

}  // namespace lsf::testing
