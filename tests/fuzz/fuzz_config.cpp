// libFuzzer harness: run configs (models/train/config.h) — the JSON text, then "--set"
// overrides, one per line after the first NUL byte. A toy family stands in for the model
// families (their sections are exercised by tests/test_configs.cpp), so the harness links only
// the config layer: parsing, the strict key check, overrides, the common sections' validation.
#include <vector>

#include "fuzz_common.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"

namespace {

struct ToySections final : lsf::train::TaskSections {
  int64_t size = 4;
  double scale = 1.0;
  std::string path;
  std::unique_ptr<lsf::train::TaskSections> clone() const override { return std::make_unique<ToySections>(*this); }
  void visit(lsf::train::FieldVisitor& v) override {
    v.field("data.path", path);
    v.field("model.size", size);
    v.field("model.scale", scale);
  }
};

const bool registered = lsf::train::register_task_family(lsf::train::TaskFamily{
                             .name = "toy",
                             .tasks = {"listops"},
                             .default_sections = [](const std::string&) -> std::unique_ptr<lsf::train::TaskSections> {
                               return std::make_unique<ToySections>();
                             },
                             .validate = [](const std::string&, const lsf::train::RunConfig&) {},
                             .check_data_paths = [](const lsf::train::RunConfig&) {},
                             .make = [](const lsf::train::RunConfig&) -> std::unique_ptr<lsf::train::Task> { return nullptr; }});

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)registered;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string json = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    size_t start = nul + 1;
    while (start <= input.size()) {
      size_t end = input.find('\n', start);
      if (end == std::string::npos) end = input.size();
      overrides.push_back(input.substr(start, end - start));
      start = end + 1;
    }
  }
  lsf::fuzz::expect_only_lsf_errors([&] {
    const lsf::train::RunConfig c = lsf::train::parse_config(json, overrides, "fuzz");
    lsf::train::parse_config(lsf::train::to_json(c), {}, "fuzz round trip");  // what it wrote, it reads
  });
  return 0;
}
