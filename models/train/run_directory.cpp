// The run directory: preparing it for a new or resumed run, and metrics.jsonl (see
// run_directory.h).
#include "lsformer/models/train/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "lsformer/engine/error.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/train/memory_usage.h"
#include "lsformer/models/train/trainer.h"

namespace lsf::train {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A metric as JSON: counts as integers, everything else as a number.
json metric_json(const Metric& m) {
  return m.kind == Metric::Kind::Count ? json(int64_t(m.value)) : json(m.value);
}

}  // namespace

RunPaths::RunPaths(const std::string& d)
    : dir(d),
      config((fs::path(d) / "config.json").string()),
      metrics((fs::path(d) / "metrics.jsonl").string()),
      summary((fs::path(d) / "summary.json").string()),
      best((fs::path(d) / "best.safetensors").string()),
      last((fs::path(d) / "last.safetensors").string()),
      tensorboard((fs::path(d) / "tb").string()),
      curves((fs::path(d) / "curves.svg").string()) {}

std::string config_differences(const RunConfig& a, const RunConfig& b) {
  json fa = json::parse(to_json(a)).flatten(), fb = json::parse(to_json(b)).flatten();
  std::string diff;
  for (const auto& [k, v] : fa.items()) {
    if (k == "/description" || k == "/train/threads" || k == "/train/non_finite" || k == "/train/memory_limit" ||
        fb.value(k, json()) == v)
      continue;
    std::string key = k.substr(1);
    for (char& ch : key) ch = ch == '/' ? '.' : ch;
    diff += (diff.empty() ? "" : ", ") + key + " " + v.dump() + " → " + fb.value(k, json()).dump();
  }
  for (const auto& [k, v] : fb.items()) {  // keys only the new config has (another task's schema)
    if (fa.contains(k)) continue;
    std::string key = k.substr(1);
    for (char& ch : key) ch = ch == '/' ? '.' : ch;
    diff += (diff.empty() ? "" : ", ") + key + " (absent) → " + v.dump();
  }
  return diff;
}

// The temporaries of atomic writes (".<name>.tmp.<pid>", engine/safetensors.h) that a process
// killed mid-write left in the run directory: only a process writing this run made them, and
// the run is now ours, so they are removed (their targets were never replaced by them).
static void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (name.empty() || name[0] != '.' || at == std::string::npos || at + 5 >= name.size()) continue;
    if (name.find_first_not_of("0123456789", at + 5) != std::string::npos) continue;
    if (!fs::is_regular_file(entry.symlink_status(ec))) continue;  // the writer makes regular files only
    fs::remove(entry.path(), ec);
  }
}

// mkdir -p, its failure named as the run directory's (a bare filesystem_error named neither
// --out nor what to do).
static void create_run_directory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LSF_CHECK(!ec) << "cannot create the run directory '" << dir << "': " << ec.message() << "; choose another --out";
}

static std::string lock_path(const std::string& dir) { return (fs::path(dir) / ".lock").string(); }

// An exclusive, non-blocking flock on DIR/.lock, with this process's id written in it for the
// message another process gets. flock locks belong to the open file, so a second open in this
// very process is refused too; the kernel drops the lock when the file is closed or the process
// dies (SIGKILL included), so a crashed run never leaves its directory locked. Null when another
// run holds the lock; `holder` then gets its process id, when it wrote one.
static std::shared_ptr<void> try_lock_run_directory(const std::string& dir, std::string* holder) {
  const std::string path = lock_path(dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LSF_CHECK(fd >= 0) << "cannot open the run directory's lock file '" << path << "': " << std::strerror(errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char owner[32] = {};
    const ssize_t n = ::pread(fd, owner, sizeof owner - 1, 0);
    ::close(fd);
    LSF_CHECK(err == EWOULDBLOCK) << "cannot lock the run directory's lock file '" << path << "': " << std::strerror(err);
    if (holder) *holder = n > 0 ? owner : "";
    return nullptr;
  }
  // The process id is a note for another process's message; the lock holds without it.
  const std::string pid = std::to_string(::getpid());
  const bool noted = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) == ssize_t(pid.size());
  (void)noted;
  return std::shared_ptr<void>(new int(fd), [](void* p) {
    int* owned = static_cast<int*>(p);
    ::close(*owned);  // releases the flock
    delete owned;
  });
}

bool run_directory_in_use(const std::string& dir) {
  const int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the probe's own lock, if it got one
  return held;
}

// The last steps of opening a directory for a run, under its lock: stale temporaries removed,
// config.json written.
static RunPaths claimed(RunPaths paths, const std::string& config_text) {
  remove_stale_temporaries(paths.dir);
  write_file_atomically(paths.config, config_text);
  return paths;
}

RunPaths open_run_directory(const RunConfig& config, const std::string& dir, bool resume) {
  RunPaths paths(dir);
  // A directory without last.safetensors holds no progress (a run that failed while loading, or
  // stopped before its first checkpoint): a new run starts it afresh.
  auto check_no_run = [&] {
    LSF_CHECK(!fs::exists(paths.last))
        << "'" << dir << "' already holds a run: continue it with --resume, or choose another --out";
  };
  if (resume) {
    LSF_CHECK(fs::exists(paths.last)) << "--resume: '" << paths.last << "' does not exist (nothing to resume in '" << dir << "')";
    std::string diff = config_differences(checkpoint_config(paths.last), config);
    LSF_CHECK(diff.empty()) << "--resume: the config differs from the run's in '" << dir << "': " << diff;
  } else {
    check_no_run();
  }
  LSF_CHECK(!fs::exists(dir) || fs::is_directory(dir))
      << "--out '" << dir << "' exists and is not a directory; choose a directory for the run";
  validate_data_paths(config);  // before the run directory exists
  const std::string text = to_json(config);  // too: a failure must not leave an empty directory
  create_run_directory(dir);
  std::string holder;
  paths.lock = try_lock_run_directory(dir, &holder);
  LSF_CHECK(paths.lock) << "'" << dir << "' is in use by another training run"
                        << (holder.empty() ? "" : " (process " + holder + ")")
                        << ": wait for it to end, or choose another --out";
  if (!resume) check_no_run();  // again under the lock: another run may have checkpointed since
  return claimed(std::move(paths), text);
}

RunPaths open_free_run_directory(const RunConfig& config, const std::string& base) {
  validate_data_paths(config);
  const std::string text = to_json(config);
  // Bounded so that a directory that cannot be used for a reason not checked here ends in an
  // error rather than a loop; ten thousand runs of one config is far beyond any real use.
  constexpr int kMostCandidates = 10000;
  for (int n = 1; n <= kMostCandidates; ++n) {
    RunPaths paths(n == 1 ? base : base + "-" + std::to_string(n));
    std::error_code ec;
    if (fs::exists(paths.last, ec) || (fs::exists(paths.dir, ec) && !fs::is_directory(paths.dir, ec))) continue;
    create_run_directory(paths.dir);
    paths.lock = try_lock_run_directory(paths.dir, nullptr);
    // Under the lock, once more: another run may have taken and checkpointed it meanwhile.
    if (!paths.lock || fs::exists(paths.last)) continue;
    return claimed(std::move(paths), text);
  }
  LSF_FAIL() << "no free run directory among '" << base << "', '" << base << "-2' ... '" << base << "-"
             << kMostCandidates << "': remove old runs, or choose --out";
}

MetricsLog::MetricsLog(const std::string& path, bool resume, int64_t resumed_step) : path_(path) {
  std::vector<std::string> kept;
  if (resume) {
    std::ifstream in(path);
    int64_t line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
        warnings_.push_back("dropped line " + std::to_string(line_no) + " of '" + path + "': " +
                            (in.eof() ? "a torn last line (the run was killed while writing it)" : "not a metrics entry"));
        continue;
      }
      if (j["step"].get<int64_t>() <= resumed_step && !j.contains("final")) kept.push_back(line);
    }
  }
  // The kept lines replace the file atomically: a kill here never loses the run's history.
  std::string text;
  for (const auto& line : kept) text += line + "\n";
  write_file_atomically(path, text);
  errno = 0;
  out_.open(path, std::ios::app);
  LSF_CHECK(out_) << "cannot open '" << path << "' for appending: " << (errno ? std::strerror(errno) : "unknown error");
}

void MetricsLog::write_line(const std::string& line) {
  // One write() per line (flushed at once): a kill cannot leave half a line behind in practice,
  // and a resume drops a torn last line anyway. A failure (disk full, I/O error) ends the run
  // with its reason; the checkpoints written so far are intact.
  errno = 0;
  out_ << line << "\n";
  out_.flush();
  LSF_CHECK(out_) << "cannot write '" << path_ << "': " << (errno ? std::strerror(errno) : "unknown error");
}

void MetricsLog::write_train(int64_t step, double loss, const std::vector<Metric>& metrics, double lr, const std::string& unit,
                             double rate, double elapsed_s) {
  json j = {{"split", "train"}, {"step", step}, {"loss", loss}, {"lr", lr}, {unit + "_per_s", rate}, {"elapsed_s", elapsed_s}};
  for (const Metric& m : metrics) j[m.name] = metric_json(m);
  write_line(j.dump());
}

void MetricsLog::write_eval(const EvalResult& r, bool final) {
  json j = {{"split", r.split}, {"step", r.step}, {"loss", r.loss}};
  for (const Metric& m : r.metrics) j[m.name] = metric_json(m);
  if (final) j["final"] = true;
  write_line(j.dump());
}

void log_train_scalars(EventWriter& tb, int64_t step, double loss, const std::vector<Metric>& metrics, double lr,
                       const std::string& unit, double rate, double grad_norm) {
  tb.add_scalar("train/loss", loss, step);
  for (const Metric& m : metrics)
    if (m.kind != Metric::Kind::Count) tb.add_scalar("train/" + m.name, m.value, step);
  tb.add_scalar("train/lr", lr, step);
  tb.add_scalar("train/grad_norm", grad_norm, step);
  tb.add_scalar("train/" + unit + "_per_s", rate, step);
  for (const auto& [tag, value] : memory_scalars()) tb.add_scalar(tag, value, step);
  tb.flush();
}

void log_eval_scalars(EventWriter& tb, const EvalResult& r) {
  tb.add_scalar(r.split + "/loss", r.loss, r.step);
  for (const Metric& m : r.metrics)
    if (m.kind != Metric::Kind::Count) tb.add_scalar(r.split + "/" + m.name, m.value, r.step);
  tb.flush();
}

void log_histograms(EventWriter& tb, const nn::Module& model, int64_t step) {
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<float> values = p.to_vector<float>();
    tb.add_histogram("parameters/" + name, values, step);
    const Tensor g = p.grad();
    if (g.defined()) {
      const std::vector<float> grads = g.to_vector<float>();
      tb.add_histogram("gradients/" + name, grads, step);
    }
  }
  tb.flush();
}

}  // namespace lsf::train
