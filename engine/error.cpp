// lsf::Error and the LSF_CHECK message builder (see error.h), and the printing of shapes in
// messages ({2, 3}).
#include "lsformer/engine/error.h"

namespace lsf {

std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& values) {
  os << '{';
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  return os << '}';
}

namespace detail {
ErrorBuilder::~ErrorBuilder() noexcept(false) {
  // The source location is useful to us, not to the user: it goes after the message.
  std::string where = std::string(file_);
  auto slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  throw Error(stream_.str() + " [" + where + ":" + std::to_string(line_) + "]");
}
}  // namespace detail
}  // namespace lsf
