// lsf: the lsformer command-line tool. Subcommands come from one table, so --help and the
// parser cannot drift apart.
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>

#include "cli.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  std::function<int(const std::vector<std::string>&)> run;
  std::function<void(std::ostream&)> usage;  // the command's flags
  bool computes = false;  // trains or evaluates models: slow OpenBLAS kernels are worth a note
};

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train a model from a JSON config (configs/)", lsf::cli::run_train, lsf::cli::train_usage, true},
      {"eval", "evaluate a training checkpoint on the dev or test split", lsf::cli::run_eval, lsf::cli::eval_usage, true},
      {"generate", "continue a prompt with a char-LM checkpoint (lsf generate --checkpoint C --prompt TEXT)",
       lsf::cli::run_generate, lsf::cli::generate_usage, true},
      {"data", "write a dataset (lsf data listops --out DIR, lsf data text --from PATH --out DIR)", lsf::cli::run_data, lsf::cli::data_usage},
      {"bench", "time a config's training steps on this machine, next to its sgemm rate and bandwidth",
       lsf::cli::run_bench, lsf::cli::bench_usage, true},
      {"info", "print version, build options, BLAS, threads, CPU kernels and devices; --model CONFIG: parameters and GFLOPs",
       lsf::cli::run_info, lsf::cli::info_usage},
      {"plot", "draw the training and dev curves of runs as SVG (lsf plot RUN [RUN ...] --out curves.svg)",
       lsf::cli::run_plot, lsf::cli::plot_usage},
      {"attention", "draw one example's attention map of a checkpoint (lsf attention --checkpoint C --out attn.svg)",
       lsf::cli::run_attention, lsf::cli::attention_usage},
      {"report", "write RUN/report.html: config, summary and curves in one page (lsf report RUN)",
       lsf::cli::run_report, lsf::cli::report_usage},
  };
  return table;
}

void usage(std::ostream& os) {
  os << "usage: lsf <command> [options]\n\ncommands:\n";
  for (const Command& c : commands()) os << "  " << c.name << std::string(10 - std::strlen(c.name), ' ') << c.summary << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS chose its kernels when it was loaded; on a CPU newer than it knows it falls back to
  // generic ones several times slower. Start again with the right ones (engine/blas_core.h).
  lsf::reexec_with_best_blas_core(argv);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  lsf::cli::set_program_name(argv[0]);
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : commands()) {
    if (argv[1] != std::string(c.name)) continue;
    for (const std::string& a : args) {
      if (a == "--help" || a == "-h") {
        c.usage(std::cout);
        return 0;
      }
    }
    // Still on weaker kernels for a command that computes: the environment chose them
    // (OPENBLAS_CORETYPE) or the restart failed. Run as asked, but say once what it costs
    // (`lsf info` says it in its BLAS line): once per job, so under a launcher only rank 0 does.
    if (c.computes && lsf::dist::detect_launch_environment().rank == 0)
      if (const std::string advice = lsf::blas_core_advice(lsf::blas_core_choice(), lsf::BlasAdviceFor::RestartedProgram);
          !advice.empty())
        std::cerr << "lsf " << c.name << ": note: " << advice << "\n";
    try {
      return c.run(args);
    } catch (const lsf::cli::UsageError& e) {  // bad flags: exit 2 with the usage
      std::cerr << "lsf " << c.name << ": " << e.what() << "\n";
      c.usage(std::cerr);
      return 2;
    } catch (const std::exception& e) {  // lsf::Error for bad input; anything else is a bug
      std::cerr << "lsf " << c.name << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "lsf: unknown command '" << argv[1] << "'\n";
  usage(std::cerr);
  return 2;
}
