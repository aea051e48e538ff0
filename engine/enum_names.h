// Enums with names: one table of names per enum (names[i] names the enumerator of value i), used
// to print an option and to parse it from text (configs, command lines) in exactly one place.
//
//   enum class Pooling { Cls, Mean };
//   inline constexpr const char* kPoolingNames[] = {"cls", "mean"};
//   enum_name(Pooling::Mean, kPoolingNames)            // "mean"
//   parse_enum<Pooling>("max", kPoolingNames, "pooling")
//       // throws lsf::Error: pooling must be one of cls, mean, got "max"
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "lsformer/engine/error.h"

namespace lsf {

// The names joined by ", " ("cls, mean").
inline std::string enum_names_list(std::span<const char* const> names) {
  std::string list;
  for (const char* n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  return list;
}

template <typename E>
const char* enum_name(E value, std::span<const char* const> names) {
  const size_t i = size_t(value);
  return i < names.size() ? names[i] : "?";
}

// The enumerator named `text`; an lsf::Error naming `what`, the allowed names and the text.
template <typename E>
E parse_enum(const std::string& text, std::span<const char* const> names, const std::string& what) {
  for (size_t i = 0; i < names.size(); ++i)
    if (text == names[i]) return E(i);
  LSF_FAIL() << what << " must be one of " << enum_names_list(names) << ", got \"" << text << "\"";
}

}  // namespace lsf
