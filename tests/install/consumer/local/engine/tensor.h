// The consumer's own engine/tensor.h (see ../data/batch.h).
#pragma once

struct ConsumerTensor {
  int size = 4;
};
