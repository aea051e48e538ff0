// CPU kernel of pack_sequences / unpack_sequences (ops/kernels/pack.h): row copies of e
// elements, parallel over the output's rows (each written once: deterministic).
#include <algorithm>
#include <cstring>

#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/kernels/pack.h"

namespace lsf::cpu {
namespace {

void repack_rows(const Tensor& packed, const Tensor& padded, const Tensor& index, bool to_padded, double fill) {
  const int64_t B = padded.size(0), H = padded.size(1), n = padded.size(2), e = padded.size(3);
  const int64_t T = packed.size(0);
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t slots = B * n;
  if (to_padded) {  // never trust an index: a bad one is an error, not a wild read
    for (int64_t i = 0; i < slots; ++i)
      LSF_CHECK(idx[i] >= -1 && idx[i] < T) << "unpack_sequences: slot " << i << " names packed row " << idx[i]
                                             << ", outside [-1, " << T << ")";
  } else {
    for (int64_t r = 0; r < T; ++r)
      LSF_CHECK(idx[r] >= 0 && idx[r] < slots)
          << "pack_sequences: packed row " << r << " names position " << idx[r] << ", outside [0, " << slots << ")";
  }
  dispatch_float(packed.dtype(), to_padded ? "unpack_sequences" : "pack_sequences", [&]<typename T_>() {
    T_* pk = packed.data_ptr<T_>();
    T_* pd = padded.data_ptr<T_>();
    const T_ fill_value = T_(fill);
    const int64_t rows = to_padded ? slots : T;
#pragma omp parallel for schedule(static) if (rows * H * e >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src = idx[r];
      // (b, t) of this row: the padded side's coordinates.
      const int64_t bt = to_padded ? r : src, b = bt / n, t = bt % n;
      for (int64_t h = 0; h < H; ++h) {
        T_* padded_row = pd + ((b * H + h) * n + t) * e;
        if (to_padded) {
          if (src < 0) std::fill(padded_row, padded_row + e, fill_value);
          else std::memcpy(padded_row, pk + (src * H + h) * e, size_t(e) * sizeof(T_));
        } else {
          std::memcpy(pk + (r * H + h) * e, padded_row, size_t(e) * sizeof(T_));
        }
      }
    }
  });
}

}  // namespace

LSF_REGISTER_KERNEL(repack_rows_kernel, DeviceType::CPU, repack_rows);

}  // namespace lsf::cpu
