// lsf::Error and the LSF_CHECK macro: how every layer of lsformer reports bad input.
//
//   LSF_CHECK(a.dim() == 2) << "matmul: expected a 2-D tensor, got shape " << a.shape();
//
// The message is built with operator<< and thrown as lsf::Error when the full expression ends.
// The library never calls abort() or exit() on bad input.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lsf {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Shapes print as {2, 3} in error messages.
std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& values);

namespace detail {
// Collects a message and throws it from its destructor. Only ever a temporary inside
// LSF_CHECK / LSF_FAIL, destroyed at the end of its own statement, never during unwinding.
class ErrorBuilder {
 public:
  ErrorBuilder(const char* file, int line) : file_(file), line_(line) {}
  ErrorBuilder(const ErrorBuilder&) = delete;
  ErrorBuilder& operator=(const ErrorBuilder&) = delete;
  [[noreturn]] ~ErrorBuilder() noexcept(false);
  template <typename T>
  ErrorBuilder& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace detail
}  // namespace lsf

// The switch makes the macro one statement, so it nests safely in an unbraced if/else.
#define LSF_CHECK(cond)        \
  switch (0)                   \
  case 0:                      \
  default:                     \
    if (cond) {                \
    } else                     \
      ::lsf::detail::ErrorBuilder(__FILE__, __LINE__)
#define LSF_FAIL() ::lsf::detail::ErrorBuilder(__FILE__, __LINE__)
