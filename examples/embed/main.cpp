// The smallest program that embeds lsformer: make tensors, run ops, backpropagate, print the
// gradient. Built against the installed package by scripts/test.sh (and CI).
#include <iostream>
#include <lsformer/lsformer.h>

int main() {
  lsf::manual_seed(0);
  // A linear classifier on two examples with three features and two classes.
  lsf::Tensor w = lsf::randn({3, 2}, lsf::TensorOptions().requires_grad(true));
  lsf::Tensor b = lsf::zeros({2}, lsf::TensorOptions().requires_grad(true));
  lsf::Tensor x = lsf::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  lsf::Tensor target = lsf::tensor(std::vector<int64_t>{0, 1});

  lsf::Tensor logits = lsf::matmul(x, w) + b;             // [2, 2]
  lsf::Tensor loss = lsf::cross_entropy(logits, target);  // mean over the batch
  loss.backward();

  std::cout << "loss = " << loss << "\n";
  std::cout << "dloss/dw = " << w.grad() << "\n";
  std::cout << "dloss/db = " << b.grad() << "\n";
  return 0;
}
