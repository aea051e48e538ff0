// Thread count for lsformer's CPU work: our OpenMP loops and OpenBLAS share one setting.
#pragma once

namespace lsf {

// Sets the number of threads used by CPU kernels and by OpenBLAS GEMMs (n ≥ 1). Our kernels get
// all n; OpenBLAS runs at most its build's MAX_THREADS (64 in Debian's: `lsf info` prints both).
void set_num_threads(int n);
int get_num_threads();

}  // namespace lsf
