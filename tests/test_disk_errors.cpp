// Disk full and read-only run directories (issue #15): every file a run writes — checkpoints,
// metrics.jsonl, TensorBoard events — fails with an error naming the path and the system's
// reason, and the previous checkpoint stays intact and loadable. Tests run as root in CI, where
// chmod stops nothing, so the faults are real ones: the checkpoint's temporary file made a
// symbolic link to /dev/full (ENOSPC on every write), and, where mount(2) is permitted, a tiny
// tmpfs filled up or remounted read-only (EROFS).
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/models/train/checkpoint.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/run_directory.h"
#include "lsformer/models/train/tensorboard.h"
#include "lsformer/models/train/trainer.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

const std::string kConfigDir = std::string(LSF_FIXTURE_DIR) + "/../../configs";

// The quickstart cut to a few tiny steps, a checkpoint every step.
train::RunConfig tiny_config(int64_t steps) {
  return train::load_config(kConfigDir + "/quickstart.json",
                            {"train.steps=" + std::to_string(steps), "schedule.name=constant", "schedule.warmup_steps=0", "train.eval_every=0",
                             "train.checkpoint_every=1", "train.log_every=1", "data.generate.train=64",
                             "data.generate.dev=8", "data.generate.test=8", "train.batch_size=8", "model.layers=1"});
}

// The step stored in a checkpoint (and that it loads at all).
int64_t checkpoint_step(const fs::path& path) {
  const train::RunConfig config = train::checkpoint_config(path.string());
  std::unique_ptr<train::Task> task = train::make_task(config);
  task->load_data({"train"});
  auto model = task->build_model();
  return load_checkpoint(path.string(), *model, nullptr, /*restore_rng=*/false).step;
}

// A tmpfs of `bytes` mounted on a fresh directory for the test's lifetime; mounted() is false
// where mount(2) is not permitted (no CAP_SYS_ADMIN).
class Tmpfs {
 public:
  Tmpfs(const std::string& name, size_t bytes) : dir_(testing::fresh_dir("disk_errors", name, /*create=*/true)) {
    const std::string options = "size=" + std::to_string(bytes);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~Tmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  bool remount_read_only() {
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// Fills the file system holding `dir` until a write fails.
void fill(const fs::path& dir) {
  std::ofstream out(dir / "filler", std::ios::binary);
  const std::string block(4096, 'x');
  while (out.write(block.data(), std::streamsize(block.size())) && out.flush()) {
  }
}

}  // namespace

TEST_CASE("a checkpoint write that hits a full disk names the path and ENOSPC, the previous one is intact", "[disk]") {
  const fs::path dir = testing::fresh_dir("disk_errors", "enospc");
  std::ostringstream log;
  testing::run_training(tiny_config(4), dir, log, false, /*stop_after=*/2);
  const fs::path last = dir / "last.safetensors";
  REQUIRE(checkpoint_step(last) == 2);
  // save's temporary file is ".last.safetensors.tmp.<pid>" in the run directory: make it /dev/full.
  const fs::path tmp = dir / (".last.safetensors.tmp." + std::to_string(::getpid()));
  fs::create_symlink("/dev/full", tmp);
  CHECK_THROWS_WITH(testing::run_training(tiny_config(4), dir, log, /*resume=*/true),
                    Contains("writing '" + last.string() + "' failed") && Contains("No space left on device"));
  CHECK_FALSE(fs::exists(fs::symlink_status(tmp)));  // the temporary is gone
  CHECK(checkpoint_step(last) == 2);                 // and the previous checkpoint loads
  // With the disk back, the run resumes from it and finishes.
  CHECK(testing::run_training(tiny_config(4), dir, log, /*resume=*/true).steps == 4);
}

TEST_CASE("a TensorBoard event file on a full disk is an error naming it and ENOSPC", "[disk]") {
  const fs::path dir = testing::fresh_dir("disk_errors", "tb", /*create=*/true);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // The writer names its file by the current second: cover the next few with /dev/full.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  for (int64_t s = second; s < second + 10; ++s)
    fs::create_symlink("/dev/full", dir / ("events.out.tfevents." + std::to_string(s) + "." + host));
  CHECK_THROWS_WITH(train::EventWriter(dir.string()),
                    Contains("TensorBoard event file '" + dir.string() + "/events.out.tfevents.") &&
                        Contains("No space left on device"));
}

TEST_CASE("a full or read-only file system: metrics.jsonl and checkpoints fail by name, the last checkpoint loads", "[disk]") {
  Tmpfs fs_small("tmpfs", 4 << 20);
  if (!fs_small.mounted()) {
    WARN("skipped: mount(2) of a tmpfs is not permitted here (needs CAP_SYS_ADMIN); the /dev/full cases still ran");
    return;
  }
  SECTION("metrics.jsonl on a full disk") {
    const fs::path metrics = fs_small.dir() / "metrics.jsonl";
    train::MetricsLog log(metrics.string(), /*resume=*/false, 0);
    fill(fs_small.dir());
    std::string error;
    try {
      for (int i = 0; i < 100000; ++i) log.write_train(i, 1.0, {}, 1e-3, "samples", 1.0, 1.0);  // until a page is needed
    } catch (const Error& e) {
      error = e.what();
    }
    CHECK_THAT(error, Contains("cannot write '" + metrics.string() + "': No space left on device"));
  }
  SECTION("a run directory remounted read-only") {
    const fs::path dir = fs_small.dir() / "run";
    std::ostringstream log;
    testing::run_training(tiny_config(4), dir, log, false, /*stop_after=*/2);
    REQUIRE(fs_small.remount_read_only());
    CHECK_THROWS_WITH(testing::run_training(tiny_config(4), dir, log, /*resume=*/true),
                      Contains("Read-only file system") && Contains(dir.string()));
    CHECK(checkpoint_step(dir / "last.safetensors") == 2);
  }
}
