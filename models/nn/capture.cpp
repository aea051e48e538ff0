// nn::CaptureScope (see capture.h).
#include "lsformer/models/nn/capture.h"

#include <sstream>

#include "lsformer/engine/error.h"

namespace lsf::nn {

namespace detail {
CaptureScope*& active_capture_scope() {
  thread_local CaptureScope* scope = nullptr;
  return scope;
}
}  // namespace detail

CaptureScope::CaptureScope(const Module& root, std::vector<std::string> paths) : prefixes_(std::move(paths)) {
  paths_[&root] = "";
  for (const auto& [path, module] : root.named_modules()) paths_.emplace(module.get(), path);
  previous_ = detail::active_capture_scope();
  detail::active_capture_scope() = this;
}

CaptureScope::~CaptureScope() {
  // Scopes end in reverse order of creation (they are stack objects); restore the outer one.
  if (detail::active_capture_scope() == this) detail::active_capture_scope() = previous_;
}

bool CaptureScope::path_of(const Module* module, std::string* path) const {
  auto it = paths_.find(module);
  if (it == paths_.end()) return false;
  if (path != nullptr) *path = it->second;
  return true;
}

bool CaptureScope::wants(const Module* module) const {
  auto it = paths_.find(module);
  if (it == paths_.end()) return false;
  if (prefixes_.empty()) return true;
  const std::string& p = it->second;
  for (const std::string& prefix : prefixes_) {
    // "a.b" selects "a.b" and "a.b.c", not "a.bc".
    if (prefix.empty() || p == prefix || (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0 &&
                                          p[prefix.size()] == '.'))
      return true;
  }
  return false;
}

void CaptureScope::record(const Module* module, std::string_view name, const Tensor& tensor) {
  auto it = paths_.find(module);
  if (it == paths_.end()) return;
  const std::string base = it->second.empty() ? std::string(name) : it->second + "." + std::string(name);
  std::string key = base;
  for (int i = 1; tensors_.count(key) != 0; ++i) key = base + "#" + std::to_string(i);
  tensors_.emplace(key, tensor);
}

const Tensor& CaptureScope::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second;
  std::ostringstream os;
  for (const auto& [k, v] : tensors_) os << (os.tellp() > 0 ? ", " : "") << k;
  LSF_FAIL() << "CaptureScope: nothing was recorded as '" << name << "'; recorded: "
             << (tensors_.empty() ? std::string("nothing") : os.str());
}

std::vector<std::string> CaptureScope::names_under(const std::string& module_path) const {
  std::vector<std::string> out;
  const std::string prefix = module_path.empty() ? "" : module_path + ".";
  for (const auto& [k, v] : tensors_) {
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    if (k.find('.', prefix.size()) != std::string::npos) continue;  // a descendant's tensor
    out.push_back(k);
  }
  return out;
}

CapturePause::CapturePause() : paused_(detail::active_capture_scope()) { detail::active_capture_scope() = nullptr; }
CapturePause::~CapturePause() { detail::active_capture_scope() = paused_; }

}  // namespace lsf::nn
