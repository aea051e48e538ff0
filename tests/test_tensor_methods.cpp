// The libtorch-style Tensor methods (engine/tensor.h, ops/tensor_methods.cpp): a short PyTorch
// snippet ported line for line compiles and computes exactly what the free functions compute,
// and every method is the free function of the same name (bit for bit, gradients included).
#include "helpers.h"

using namespace lsf;

namespace {

// Values and (when a leaf requires grad) the gradient must be bitwise equal: the method is only
// spelling, so not even rounding may differ.
void check_same(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  if (a.dtype() == kBool) CHECK(a.to_vector<bool>() == b.to_vector<bool>());
  else if (a.dtype() == kI64) CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
  else CHECK(a.to_vector<double>() == b.to_vector<double>());
}

}  // namespace

TEST_CASE("a PyTorch snippet ports line for line onto Tensor methods", "[tensor_methods]") {
  // The PyTorch original (masked scaled dot-product attention and a small loss):
  //   scores = q.matmul(k.transpose(-2, -1)).div(math.sqrt(d))
  //   scores = scores.masked_fill(blocked, float("-inf"))
  //   attn = scores.softmax(-1)
  //   out = attn.matmul(v)
  //   loss = out.pow(2).mean() + out.abs().sum().mul(0.01) - attn.clamp(min=1e-6).log().mean(1).sum()
  manual_seed(5);
  const int64_t B = 2, n = 5, d = 4;
  auto leaf = [&](const Shape& s) { return randn(s, TensorOptions(kF64).requires_grad(true)); };
  Tensor q = leaf({B, n, d}), k = leaf({B, n, d}), v = leaf({B, n, d});
  std::vector<bool> blocked_values(B * n * n);
  for (int64_t i = 0; i < B * n * n; ++i) blocked_values[i] = (i % n) > (i / n) % n;  // causal
  Tensor blocked = tensor(blocked_values, {B, n, n});

  Tensor scores = q.matmul(k.transpose(-2, -1)).div(std::sqrt(double(d)));
  scores = scores.masked_fill(blocked, -INFINITY);
  Tensor attn = scores.softmax(-1);
  Tensor out = attn.matmul(v);
  Tensor loss = out.pow(2).mean() + out.abs().sum().mul(0.01) - attn.clamp(1e-6, std::nullopt).log().mean({1}).sum();
  loss.backward();
  std::vector<Tensor> method_grads = {q.grad(), k.grad(), v.grad()};

  // The same with the free functions.
  for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
  Tensor s2 = div(matmul(q, k.transpose(-2, -1)), std::sqrt(double(d)));
  s2 = masked_fill(s2, blocked, -INFINITY);
  Tensor a2 = softmax(s2, -1);
  Tensor o2 = matmul(a2, v);
  Tensor l2 = add(mean(pow(o2, 2)), mul(sum(abs(o2)), 0.01));
  l2 = sub(l2, sum(mean(log(clamp(a2, 1e-6, std::nullopt)), {1})));
  l2.backward();

  check_same(loss, l2);
  check_same(out, o2);
  check_same(method_grads[0], q.grad());
  check_same(method_grads[1], k.grad());
  check_same(method_grads[2], v.grad());
}

TEST_CASE("every Tensor method is its free function", "[tensor_methods]") {
  manual_seed(11);
  Tensor x = randn({3, 4}, kF64), y = randn({3, 4}, kF64), w = randn({4, 2}, kF64);
  Tensor pos = add(abs(x), 0.5);
  Tensor mask = gt(y, 0.0);
  Tensor index = tensor(std::vector<int64_t>{2, 0, 1, 1, 3, 0}, {3, 2});
  Tensor rows = tensor(std::vector<int64_t>{2, 0}, {2});

  check_same(x.sum(), sum(x));
  check_same(x.sum({1}, true), sum(x, {1}, true));
  check_same(x.mean(), mean(x));
  check_same(x.mean({0}), mean(x, {0}));
  check_same(x.amax({1}), amax(x, {1}));
  check_same(x.amin({0}, true), amin(x, {0}, true));
  check_same(x.max(), max(x));
  check_same(x.min(), min(x));
  check_same(x.max(1).values, max(x, 1).values);
  check_same(x.max(1).indices, max(x, 1).indices);
  check_same(x.min(0, true).indices, min(x, 0, true).indices);
  check_same(x.argmax(1), argmax(x, 1));
  check_same(x.argmin(0), argmin(x, 0));
  check_same(x.var({1}, 0), var(x, {1}, 0));
  check_same(x.matmul(w), matmul(x, w));
  check_same(x.unsqueeze(0).bmm(w.unsqueeze(0)), bmm(x.unsqueeze(0), w.unsqueeze(0)));
  check_same(x.softmax(-1), softmax(x, -1));
  check_same(x.log_softmax(0), log_softmax(x, 0));
  check_same(x.neg(), neg(x));
  check_same(x.exp(), exp(x));
  check_same(pos.log(), log(pos));
  check_same(pos.sqrt(), sqrt(pos));
  check_same(pos.rsqrt(), rsqrt(pos));
  check_same(x.abs(), abs(x));
  check_same(x.tanh(), tanh(x));
  check_same(x.sigmoid(), sigmoid(x));
  check_same(x.relu(), relu(x));
  check_same(x.gelu(), gelu(x));
  check_same(x.pow(3.0), pow(x, 3.0));
  check_same(x.clamp(-0.5, 0.5), clamp(x, -0.5, 0.5));
  check_same(x.add(y), add(x, y));
  check_same(x.add(2.0), add(x, 2.0));
  check_same(x.sub(y), sub(x, y));
  check_same(x.sub(2.0), sub(x, 2.0));
  check_same(x.mul(y), mul(x, y));
  check_same(x.mul(2.0), mul(x, 2.0));
  check_same(x.div(pos), div(x, pos));
  check_same(x.div(2.0), div(x, 2.0));
  check_same(x.eq(y), eq(x, y));
  check_same(x.eq(0.0), eq(x, 0.0));
  check_same(x.ne(y), ne(x, y));
  check_same(x.ne(0.0), ne(x, 0.0));
  check_same(x.lt(y), lt(x, y));
  check_same(x.lt(0.0), lt(x, 0.0));
  check_same(x.le(y), le(x, y));
  check_same(x.le(0.0), le(x, 0.0));
  check_same(x.gt(y), gt(x, y));
  check_same(x.gt(0.0), gt(x, 0.0));
  check_same(x.ge(y), ge(x, y));
  check_same(x.ge(0.0), ge(x, 0.0));
  check_same(x.masked_fill(mask, 7.0), masked_fill(x, mask, 7.0));
  check_same(x.where(mask, y), where(mask, x, y));
  check_same(x.gather(1, index), gather(x, 1, index));
  check_same(x.index_select(0, rows), index_select(x, 0, rows));
  std::vector<Tensor> a = x.split(3, 1), b = split(x, 3, 1);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i]);
  a = x.split(std::vector<int64_t>{1, 2}, 0), b = split(x, std::vector<int64_t>{1, 2}, 0);
  REQUIRE(a.size() == 2);
  for (size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i]);
  // Errors are the free function's, naming the op.
  CHECK_THROWS_WITH(x.matmul(x), Catch::Contains("matmul"));
}
