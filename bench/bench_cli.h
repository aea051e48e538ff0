// Command lines of the C++ benchmarks: one table of flags gives both the parser and --help,
// so they cannot drift apart.
#pragma once

#include <algorithm>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>

namespace lsf::bench {

template <typename Options>
struct Flag {
  const char* name;
  const char* arg;  // nullptr: a switch
  const char* help;
  std::function<void(Options&, const std::string&)> set;
};

template <typename Options>
void print_usage(std::ostream& os, const std::string& synopsis, const std::vector<Flag<Options>>& flags) {
  os << synopsis << "\n\noptions:\n";
  for (const Flag<Options>& f : flags) {
    std::string left = std::string(f.name) + (f.arg ? std::string(" ") + f.arg : "");
    os << "  " << left << std::string(left.size() < 24 ? 24 - left.size() : 1, ' ') << f.help << "\n";
  }
}

// Parses argv with `flags`, then returns run(options). --help prints the usage (exit 0); an
// unknown flag, a missing or a bad value prints why (exit 2); an lsf::Error from run is
// reported (exit 1).
template <typename Options>
int run_main(int argc, char** argv, const char* program, const std::string& synopsis,
             const std::vector<Flag<Options>>& flags, int (*run)(const Options&)) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(std::cout, synopsis, flags);
      return 0;
    }
    auto flag = std::find_if(flags.begin(), flags.end(), [&](const Flag<Options>& f) { return arg == f.name; });
    if (flag == flags.end()) {
      std::cerr << program << ": unknown argument '" << arg << "'\n";
      print_usage(std::cerr, synopsis, flags);
      return 2;
    }
    std::string value;
    if (flag->arg) {
      if (i + 1 >= argc) {
        std::cerr << program << ": " << flag->name << " needs a value (" << flag->arg << ")\n";
        return 2;
      }
      value = argv[++i];
    }
    try {
      flag->set(opt, value);
    } catch (const std::exception&) {
      std::cerr << program << ": bad value '" << value << "' for " << flag->name << "\n";
      return 2;
    }
  }
  try {
    return run(opt);
  } catch (const lsf::Error& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace lsf::bench
