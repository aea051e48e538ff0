// The consumer's own data/batch.h: lsformer's installed headers must not pick it up, and the
// consumer must get this one, not lsformer's.
#pragma once

struct ConsumerBatch {
  int rows = 3;
};
