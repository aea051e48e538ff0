// The CPU thread count shared by lsformer's OpenMP loops and OpenBLAS (see parallel.h).
#include "lsformer/engine/parallel.h"

#include <omp.h>

#include "lsformer/engine/error.h"

extern "C" void openblas_set_num_threads(int);

namespace lsf {

void set_num_threads(int n) {
  LSF_CHECK(n >= 1) << "set_num_threads: expected at least 1 thread, got " << n;
  // OpenBLAS first: built with OpenMP, it also sets OpenMP's count, capped at its MAX_THREADS
  // (64 in Debian's build); our loops then get all n, OpenBLAS's GEMMs at most its cap.
  openblas_set_num_threads(n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace lsf
