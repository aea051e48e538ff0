// lm::Memory: sizes, stream resets, the zero memory and checkpoint (de)serialisation.
#include "lsformer/models/lm/memory.h"

#include <set>

#include "lsformer/engine/error.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"

namespace lsf::lm {

int64_t Memory::batch_size() const {
  LSF_CHECK(!layers.empty()) << "lm::Memory: the memory is empty (no layers)";
  return layers.front().size(0);
}

int64_t Memory::length() const {
  LSF_CHECK(!layers.empty()) << "lm::Memory: the memory is empty (no layers)";
  return layers.front().size(1);
}

int64_t Memory::dim() const {
  LSF_CHECK(!layers.empty()) << "lm::Memory: the memory is empty (no layers)";
  return layers.front().size(2);
}

void Memory::reset_streams(const std::vector<int64_t>& streams) {
  const int64_t B = batch_size();
  std::vector<bool> restart(static_cast<size_t>(B), false);
  for (int64_t s : streams) {
    LSF_CHECK(s >= 0 && s < B) << "lm::Memory::reset_streams: stream " << s << " is outside [0, B = " << B << ")";
    restart[size_t(s)] = true;
  }
  reset_streams(tensor(restart, {B}).to(layers.front().device()));
}

void Memory::reset_streams(const Tensor& restart) {
  const int64_t B = batch_size();
  LSF_CHECK(restart.defined() && restart.dtype() == kBool && restart.shape() == Shape{B})
      << "lm::Memory::reset_streams: restart must be a bool tensor [B] = [" << B << "], got "
      << (restart.defined() ? restart.shape() : Shape{});
  const Tensor mask = restart.to(layers.front().device()).view({B, 1, 1});
  // masked_fill makes new tensors: a memory an earlier graph saved stays as it was.
  for (Tensor& t : layers) t = masked_fill(t, mask, 0.0);
}

void Memory::reset() {
  for (Tensor& t : layers) t = zeros(t.shape(), t.options());
}

Memory Memory::to(const TensorOptions& options) const {
  Memory m;
  for (const Tensor& t : layers) m.layers.push_back(t.to(options));
  return m;
}

Memory zero_memory(int64_t layers, int64_t batch, int64_t length, int64_t dim, const TensorOptions& options) {
  LSF_CHECK(layers >= 1 && batch >= 1 && length >= 1 && dim >= 1)
      << "lm::zero_memory: layers " << layers << ", batch " << batch << ", length " << length << " and dim " << dim
      << " must all be ≥ 1";
  Memory m;
  for (int64_t i = 0; i < layers; ++i) m.layers.push_back(zeros({batch, length, dim}, options));
  return m;
}

void check_memory(const char* who, const Memory& memory, const LmModelOptions& o, int64_t batch, const Tensor& like) {
  LSF_CHECK(int64_t(memory.layers.size()) == o.layers)
      << who << ": the memory has " << memory.layers.size() << " layers but the model has " << o.layers
      << " (start from model.initial_memory(B))";
  const Shape want{batch, o.memory_length, o.dim};
  for (size_t i = 0; i < memory.layers.size(); ++i) {
    const Tensor& t = memory.layers[i];
    LSF_CHECK(t.defined()) << who << ": memory layer " << i << " is undefined";
    LSF_CHECK(t.shape() == want) << who << ": memory layer " << i << " must be [B, C, d] = " << want
                                 << " (C = memory_length), got " << t.shape();
    LSF_CHECK(t.dtype() == like.dtype() && t.device() == like.device())
        << who << ": memory layer " << i << " is " << t.dtype() << " on " << t.device() << " but the model runs in "
        << like.dtype() << " on " << like.device();
  }
}

NamedTensors memory_tensors(const Memory& memory, const std::string& prefix) {
  NamedTensors out;
  for (size_t i = 0; i < memory.layers.size(); ++i) out.emplace_back(prefix + std::to_string(i), memory.layers[i]);
  return out;
}

Memory memory_from_tensors(const std::map<std::string, Tensor>& tensors, const LmModelOptions& o,
                           const std::string& prefix) {
  Memory m;
  std::set<std::string> expected;
  for (int64_t i = 0; i < o.layers; ++i) {
    const std::string name = prefix + std::to_string(i);
    expected.insert(name);
    auto it = tensors.find(name);
    LSF_CHECK(it != tensors.end()) << "lm::memory_from_tensors: \"" << name << "\" is missing (the model has "
                                   << o.layers << " layers)";
    const Tensor& t = it->second;
    LSF_CHECK(t.dim() == 3 && t.size(1) == o.memory_length && t.size(2) == o.dim && is_floating(t.dtype()))
        << "lm::memory_from_tensors: \"" << name << "\" must be a floating [B, C = " << o.memory_length
        << ", d = " << o.dim << "] tensor, got " << t.dtype() << " " << t.shape();
    LSF_CHECK(m.layers.empty() || t.size(0) == m.layers.front().size(0))
        << "lm::memory_from_tensors: \"" << name << "\" has batch size " << t.size(0) << " but \"" << prefix
        << "0\" has " << m.layers.front().size(0);
    m.layers.push_back(t.detach());
  }
  for (const auto& [name, t] : tensors)
    LSF_CHECK(name.rfind(prefix, 0) != 0 || expected.count(name))
        << "lm::memory_from_tensors: unexpected entry \"" << name << "\" (the model has " << o.layers << " layers)";
  return m;
}

}  // namespace lsf::lm
