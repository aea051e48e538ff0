// Shared by the libFuzzer harnesses (tests/fuzz/, scripts/fuzz.sh): the input as a file for
// readers that take a path, and the one rule every harness checks — bad input is an lsf::Error
// (a named problem), never a crash, hang, leak, undefined behaviour or other exception (the
// sanitizers and libFuzzer's -timeout / -rss_limit_mb catch the rest).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "lsformer/engine/error.h"

namespace lsf::fuzz {

// A per-process file holding `data` (rewritten on every call), with the given suffix.
inline const std::string& as_file(const uint8_t* data, size_t size, const std::string& suffix = "") {
  static const std::string path = "/tmp/lsf_fuzz_" + std::to_string(::getpid()) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

// Runs `parse`; an lsf::Error is the expected outcome of bad input; anything else thrown aborts
// (libFuzzer reports it as a crash with the input).
template <typename Parse>
void expect_only_lsf_errors(Parse&& parse) {
  try {
    parse();
  } catch (const lsf::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: a non-lsf::Error exception escaped: %s\n", e.what());
    std::abort();
  }
}

}  // namespace lsf::fuzz
