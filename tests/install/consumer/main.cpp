// Uses lsformer through its installed headers next to headers of its own with lsformer's folder
// names; prints a result computed by the library.
#include <iostream>

#include <lsformer/lsformer.h>

#include "data/batch.h"     // the consumer's
#include "engine/tensor.h"  // the consumer's

int main() {
  ConsumerBatch batch;
  ConsumerTensor mine;
  lsf::Tensor x = lsf::ones({batch.rows, mine.size});
  lsf::Tensor total = x.sum();  // 12
  std::cout << "consumer: sum = " << total.item<float>() << "\n";
  return total.item<float>() == float(batch.rows * mine.size) ? 0 : 1;
}
