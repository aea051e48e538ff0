// Flag tables and usage errors for the lsf subcommands (see cli.h).
#include "cli.h"

#include <cstring>

namespace lsf::cli {

ParsedFlags parse_flags(const std::vector<std::string>& args, const std::vector<Flag>& table) {
  ParsedFlags parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const Flag* flag = nullptr;
    for (const Flag& f : table)
      if (args[i] == f.name) flag = &f;
    if (!flag) throw UsageError("unknown argument '" + args[i] + "'");
    if (parsed.count(flag->name) && !flag->repeatable) throw UsageError(std::string(flag->name) + " given twice");
    if (!flag->value) {
      parsed[flag->name].push_back("");
      continue;
    }
    if (i + 1 >= args.size()) throw UsageError(std::string(flag->name) + " expects a value (" + flag->value + ")");
    parsed[flag->name].push_back(args[++i]);
  }
  return parsed;
}

void print_flags(std::ostream& os, const std::vector<Flag>& table) {
  for (const Flag& f : table) {
    std::string left = std::string(f.name) + (f.value ? std::string(" ") + f.value : "");
    os << "  " << left << std::string(left.size() < 22 ? 22 - left.size() : 1, ' ') << f.help << "\n";
  }
}

std::string flag_value(const ParsedFlags& flags, const std::string& name, const std::string& fallback) {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second.back();
}

int64_t parse_int(const std::string& flag, const std::string& value, int64_t low, int64_t high) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || n < low || n > high)
    throw UsageError(flag + " expects an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "], got '" + value + "'");
  return n;
}

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

namespace {
std::string& program() {
  static std::string name = "lsf";
  return name;
}
}  // namespace

const std::string& program_name() { return program(); }
void set_program_name(const std::string& name) { program() = name; }

}  // namespace lsf::cli
