// Anomaly mode's state (the per-thread depth and call-site stack) and the finiteness scan of
// a tensor (engine/anomaly.h). The checks themselves run in autograd.cpp (record, run_backward).
#include "lsformer/engine/anomaly.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace lsf::autograd {

namespace detail {
thread_local int anomaly_depth = 0;
namespace {
thread_local std::vector<std::string> call_sites;
}
void push_call_site(std::string site) { call_sites.push_back(std::move(site)); }
void pop_call_site() {
  if (!call_sites.empty()) call_sites.pop_back();
}
}  // namespace detail

const std::string& current_call_site() {
  static const std::string none;
  return detail::call_sites.empty() || !anomaly_mode_enabled() ? none : detail::call_sites.back();
}

std::string describe_non_finite(const Tensor& t, bool nan_only) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return {};
  // Host doubles hold every floating dtype's values exactly (NaN and ±Inf included).
  const std::vector<double> values = contiguous_detached(t).to(kCPU).to(kF64).to_vector<double>();
  int64_t nans = 0, infs = 0, first = -1;
  for (size_t i = 0; i < values.size(); ++i) {
    const bool nan = std::isnan(values[i]);
    const bool inf = !nan_only && std::isinf(values[i]);
    if (!nan && !inf) continue;
    nans += nan;
    infs += inf;
    if (first < 0) first = int64_t(i);
  }
  if (first < 0) return {};
  std::ostringstream os;
  os << (nans > 0 && infs > 0 ? "NaN and Inf" : nans > 0 ? "NaN" : "Inf") << " (" << (nans + infs) << " of "
     << values.size() << " values, first at flat index " << first << ": " << values[size_t(first)] << ")";
  return os.str();
}

}  // namespace lsf::autograd
