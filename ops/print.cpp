// operator<< for tensors, formatted the way PyTorch prints them:
//   tensor([[ 1.5000, -2.0000],
//           [ 3.0000,  4.0000]], shape={2, 2}, dtype=f32)
// Floats print with 4 decimals, in scientific notation when the magnitudes span too much
// (max/min > 1000, max > 1e8, or min < 1e-4), and as "1." when every value is an integer.
// Tensors over 1000 elements show the first and last 3 entries of each dimension.
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "lsformer/engine/autograd.h"

namespace lsf {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  enum class Mode { Integer, IntegralFloat, Fixed, Scientific, Bool } mode = Mode::Fixed;
  size_t width = 1;

  std::string raw(double v) const {
    char buf[64];
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    switch (mode) {
      case Mode::Bool: return v != 0 ? "True" : "False";
      case Mode::Integer: std::snprintf(buf, sizeof buf, "%lld", (long long)v); break;
      case Mode::IntegralFloat: std::snprintf(buf, sizeof buf, "%.0f.", v); break;
      case Mode::Fixed: std::snprintf(buf, sizeof buf, "%.4f", v); break;
      case Mode::Scientific: std::snprintf(buf, sizeof buf, "%.4e", v); break;
    }
    return buf;
  }
  std::string operator()(double v) const {
    std::string s = raw(v);
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

// Which indices of a dimension of size n are shown.
std::vector<int64_t> shown(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const std::vector<double>& v, const Shape& shape, const Strides& st, size_t d,
             int64_t base, bool summarize, std::vector<double>& out) {
  if (d == shape.size()) {
    out.push_back(v[base]);
    return;
  }
  for (int64_t i : shown(shape[d], summarize))
    if (i >= 0) collect(v, shape, st, d + 1, base + i * st[d], summarize, out);
}

void print_dim(std::ostream& os, const std::vector<double>& v, const Shape& shape, const Strides& st,
               size_t d, int64_t base, bool summarize, const Formatter& f, int indent) {
  if (d == shape.size()) {
    os << f(v[base]);
    return;
  }
  os << '[';
  bool first = true;
  const bool last_dim = d + 1 == shape.size();
  // Between rows: ",\n" plus indentation; a blank line between blocks of 3-D and higher.
  const char* newlines = shape.size() - d >= 3 ? "\n\n" : "\n";
  const std::string pad(indent + d + 1, ' ');
  for (int64_t i : shown(shape[d], summarize)) {
    if (!first) {
      if (last_dim) {
        os << ", ";
      } else {
        os << ',' << newlines << pad;
      }
    }
    first = false;
    if (i < 0) {
      os << "...";
      continue;
    }
    print_dim(os, v, shape, st, d + 1, base + i * st[d], summarize, f, indent);
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  NoGradGuard no_grad;
  std::vector<double> values = t.to_vector<double>();
  const Shape& shape = t.shape();
  const Strides strides = contiguous_strides(shape);
  const bool summarize = t.numel() > kSummarizeAbove;

  std::vector<double> visible;
  collect(values, shape, strides, 0, 0, summarize, visible);
  Formatter f;
  if (t.dtype() == kBool) {
    f.mode = Formatter::Mode::Bool;
  } else if (is_integral(t.dtype())) {
    f.mode = Formatter::Mode::Integer;
  } else {
    double lo = INFINITY, hi = 0;
    bool integral = true;
    for (double v : visible) {
      if (!std::isfinite(v)) continue;
      integral = integral && std::nearbyint(v) == v;
      double a = std::fabs(v);
      if (a != 0) lo = std::min(lo, a);
      hi = std::max(hi, a);
    }
    if (integral && hi < 1e8) {
      f.mode = Formatter::Mode::IntegralFloat;
    } else if (lo != INFINITY && (hi / lo > 1000 || hi > 1e8 || lo < 1e-4)) {
      f.mode = Formatter::Mode::Scientific;
    }
  }
  for (double v : visible) f.width = std::max(f.width, f.raw(v).size());

  os << "tensor(";
  if (shape.empty()) {
    f.width = 1;
    os << f(values[0]);
  } else {
    print_dim(os, values, shape, strides, 0, 0, summarize, f, /*indent=*/7);
  }
  os << ", shape=" << shape << ", dtype=" << t.dtype();
  if (!t.device().is_cpu()) os << ", device=" << t.device();
  if (t.grad_fn()) {
    os << ", grad_fn=<" << t.grad_fn()->name() << ">";
  } else if (t.requires_grad()) {
    os << ", requires_grad=true";
  }
  return os << ')';
}

}  // namespace lsf
