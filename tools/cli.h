// Shared pieces of the lsf subcommands: a flag table per command (parsing and --help come from
// it, so they cannot drift apart), usage errors (exit status 2) and the program's name.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lsf::cli {

// Bad command-line usage: main prints it with the command's usage and exits 2. Runtime errors
// (lsf::Error: bad config values, missing files, ...) exit 1.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Flag {
  const char* name;     // "--config"
  const char* value;    // "PATH", or nullptr for a switch
  const char* help;
  bool repeatable = false;
};

// Flag → its values in order (a switch maps to one empty string). Unknown flags, missing values
// and repeated non-repeatable flags are UsageErrors; positional arguments are not accepted.
using ParsedFlags = std::map<std::string, std::vector<std::string>>;
ParsedFlags parse_flags(const std::vector<std::string>& args, const std::vector<Flag>& table);
void print_flags(std::ostream& os, const std::vector<Flag>& table);

// The flag's single value, or `fallback` when absent.
std::string flag_value(const ParsedFlags& flags, const std::string& name, const std::string& fallback = "");
// An integer flag value in [low, high], or a UsageError naming the flag.
int64_t parse_int(const std::string& flag, const std::string& value, int64_t low, int64_t high);

// 39799423 → "39,799,423" (parameter counts).
std::string grouped(int64_t n);

// argv[0], for commands that print a command line to run next.
const std::string& program_name();
void set_program_name(const std::string& name);

// The subcommands (one file each): run, and print the usage with every flag.
int run_train(const std::vector<std::string>& args);
void train_usage(std::ostream& os);
int run_eval(const std::vector<std::string>& args);
void eval_usage(std::ostream& os);
int run_data(const std::vector<std::string>& args);
void data_usage(std::ostream& os);
int run_data_pathfinder(const std::vector<std::string>& args);  // lsf data pathfinder
void data_pathfinder_usage(std::ostream& os);
int run_generate(const std::vector<std::string>& args);
void generate_usage(std::ostream& os);
int run_bench(const std::vector<std::string>& args);
void bench_usage(std::ostream& os);
int run_info(const std::vector<std::string>& args);
void info_usage(std::ostream& os);
int run_plot(const std::vector<std::string>& args);
void plot_usage(std::ostream& os);
int run_attention(const std::vector<std::string>& args);
void attention_usage(std::ostream& os);
int run_report(const std::vector<std::string>& args);
void report_usage(std::ostream& os);

}  // namespace lsf::cli
