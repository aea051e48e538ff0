// Thread count for lsformer's CPU work: our OpenMP loops and OpenBLAS share one setting.
#pragma once

namespace lsf {

// Sets the number of threads used by CPU kernels and by OpenBLAS GEMMs (n ≥ 1).
void set_num_threads(int n);
int get_num_threads();

}  // namespace lsf
