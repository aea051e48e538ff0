// Token sampling (see sampling.h): the filters and the draw run on the host in double
// precision, one row at a time, so the result depends only on the log-probabilities and the
// generator's state.
#include "lsformer/models/lm/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "lsformer/engine/error.h"
#include "lsformer/models/lm/incremental.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/shape.h"

namespace lsf::lm {

void validate(const SamplingOptions& o) {
  LSF_CHECK(std::isfinite(o.temperature) && o.temperature >= 0.0)
      << "sampling: temperature must be a finite number ≥ 0 (0 = greedy), got " << o.temperature;
  LSF_CHECK(o.top_k >= 0) << "sampling: top_k must be ≥ 0 (0 = off), got " << o.top_k;
  LSF_CHECK(o.top_p > 0.0 && o.top_p <= 1.0) << "sampling: top_p must be in (0, 1] (1 = off), got " << o.top_p;
}

Tensor sample_next_tokens(const Tensor& log_probs, const SamplingOptions& o, Generator& generator) {
  validate(o);
  LSF_CHECK(log_probs.defined() && log_probs.dim() == 2 && log_probs.size(1) >= 1 && is_floating(log_probs.dtype()))
      << "sample_next_tokens: log_probs must be a float [B, V] tensor, got "
      << (log_probs.defined() ? log_probs.shape() : Shape{});
  const int64_t B = log_probs.size(0), V = log_probs.size(1);
  const std::vector<double> lp = log_probs.to(kCPU).to(kF64).contiguous().to_vector<double>();
  const bool greedy = o.temperature == 0.0;
  const std::vector<double> uniforms = greedy ? std::vector<double>{} : rand({B}, TensorOptions(kF64), &generator).to_vector<double>();
  std::vector<int64_t> out(static_cast<size_t>(B));
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::vector<double> prob;
  for (int64_t b = 0; b < B; ++b) {
    const double* row = &lp[size_t(b * V)];
    for (int64_t v = 0; v < V; ++v)
      LSF_CHECK(!std::isnan(row[v])) << "sample_next_tokens: row " << b << " has a NaN log-probability (id " << v << ")";
    std::iota(order.begin(), order.end(), 0);
    // Most likely first, lower id first among ties (a total order: the result is unique).
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return row[a] > row[c]; });
    if (greedy) {
      out[size_t(b)] = order.front();
      continue;
    }
    const int64_t kept = o.top_k > 0 ? std::min(o.top_k, V) : V;
    const double top = row[order.front()] / o.temperature;
    prob.assign(size_t(kept), 0.0);
    double total = 0;
    for (int64_t i = 0; i < kept; ++i) total += (prob[size_t(i)] = std::exp(row[order[size_t(i)]] / o.temperature - top));
    // Nucleus: the shortest prefix whose mass reaches top_p (at least one token).
    int64_t nucleus = kept;
    if (o.top_p < 1.0) {
      double mass = 0;
      for (int64_t i = 0; i < kept; ++i) {
        mass += prob[size_t(i)] / total;
        if (mass >= o.top_p) {
          nucleus = i + 1;
          break;
        }
      }
    }
    double kept_total = 0;
    for (int64_t i = 0; i < nucleus; ++i) kept_total += prob[size_t(i)];
    const double target = uniforms[size_t(b)] * kept_total;
    int64_t chosen = nucleus - 1;  // rounding can leave the cumulative sum just below target
    double cumulative = 0;
    for (int64_t i = 0; i < nucleus; ++i) {
      cumulative += prob[size_t(i)];
      if (cumulative > target) {
        chosen = i;
        break;
      }
    }
    out[size_t(b)] = order[size_t(chosen)];
  }
  return tensor(out, {B});
}

Tensor generate(IncrementalDecoder& decoder, const Tensor& prompt, int64_t count, const SamplingOptions& options,
                Generator& generator) {
  validate(options);
  LSF_CHECK(count >= 0) << "generate: count must be ≥ 0, got " << count;
  Tensor log_probs = decoder.feed(prompt);
  std::vector<Tensor> tokens;
  for (int64_t i = 0; i < count; ++i) {
    const Tensor next = sample_next_tokens(log_probs, options, generator);
    tokens.push_back(next.view({next.size(0), 1}));
    log_probs = decoder.step(next.to(decoder.memory().layers.front().device()));
  }
  if (tokens.empty()) return zeros({decoder.batch_size(), 0}, TensorOptions(kI64));
  return cat(tokens, 1);
}

}  // namespace lsf::lm
