// The gradient all-reduce alone: the time of one in-place average of an f32 buffer across the
// ranks of the job, through lsformer's process group (engine/distributed.h; MPI on host
// tensors), for the gradient sizes of the models in bench/RESULTS.md and one full 25 MB bucket.
//
//   mpirun -np 2 --oversubscribe build/bench/bench_allreduce [--reps 50]
//
// Prints, on rank 0, per size: the median and minimum time over `reps` all-reduces (after 5
// warm-up ones; every rank starts each one after a broadcast, so skew between ranks is not
// counted) and the algorithm bandwidth (bytes / median time).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>

int main(int argc, char** argv) {
  int reps = 50;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  try {
    auto world = lsf::dist::init_world();
    if (world->size() < 2) {
      std::fprintf(stderr, "bench_allreduce: run under mpirun -np 2 (or more); this is one process\n");
      return 2;
    }
    struct Case {
      const char* name;
      int64_t bytes;
    };
    const Case cases[] = {{"ListOps quickstart gradients (88,554 f32)", 88554 * 4},
                          {"char-LM quick gradients (496,904 f32)", 496904 * 4},
                          {"one full bucket (25 MiB)", int64_t(25) << 20}};
    if (world->is_root())
      std::printf("| buffer | bytes | median us | min us | GB/s (median) |\n|---|---|---|---|---|\n");
    for (const Case& c : cases) {
      lsf::Tensor t = lsf::ones({c.bytes / 4}, lsf::TensorOptions(lsf::kF32));
      std::vector<double> us;
      std::string go;
      for (int r = 0; r < reps + 5; ++r) {
        world->broadcast_bytes(go, 0);  // start together
        const auto t0 = std::chrono::steady_clock::now();
        world->allreduce(t, lsf::dist::ReduceOp::Average, "bench");
        const double dt = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (r >= 5) us.push_back(dt);
      }
      std::sort(us.begin(), us.end());
      const double median = us[us.size() / 2];
      if (world->is_root())
        std::printf("| %s | %lld | %.1f | %.1f | %.2f |\n", c.name, static_cast<long long>(c.bytes), median, us.front(),
                    double(c.bytes) / median / 1e3);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
