// lsf::Error and the LSF_CHECK message builder (see error.h), and the printing of shapes in
// messages ({2, 3}). Messages are escaped on the way out: NUL, other control bytes (except
// newline and tab) and bytes that are not valid UTF-8 become \xNN.
#include "lsformer/engine/error.h"

#include <cstdint>

namespace lsf {

std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& values) {
  os << '{';
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  return os << '}';
}

namespace detail {
namespace {
// The length of the valid UTF-8 sequence starting at s[i], or 0 (overlong forms, surrogates and
// code points past U+10FFFF are invalid, as in RFC 3629).
size_t utf8_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
  return n;
}

std::string escape_message(const std::string& message) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += char(c);
      ++i;
    } else if (size_t n = c >= 0x80 ? utf8_length(message, i) : 0; n > 0) {
      out.append(message, i, n);
      i += n;
    } else {  // NUL (which would end what()), other controls, bytes of no valid UTF-8 sequence
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    }
  }
  return out;
}
}  // namespace

ErrorBuilder::~ErrorBuilder() noexcept(false) {
  // The source location is useful to us, not to the user: it goes after the message.
  std::string where = std::string(file_);
  auto slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  // Escaped: a message quoting a file's bytes must not be cut by a NUL (what() is a C string)
  // nor write raw binary to the user's terminal.
  throw Error(escape_message(stream_.str()) + " [" + where + ":" + std::to_string(line_) + "]");
}
}  // namespace detail
}  // namespace lsf
