// lsf data pathfinder: LRA Pathfinder images generated offline (data/pathfinder_generate.h) and
// written in the release layout that `data.task = "pathfinder"` reads:
//   DIR/imgs/<batch>/sample_<i>.png, DIR/metadata/<batch>.npy (text lines, as the release)
//
//   lsf data pathfinder --size 32 --difficulty 14 --count 20000 --seed 0 --out pathfinder32/curv_contour_length_14
//   lsf data pathfinder --size 32 --difficulty 14 --count 1 --sheet docs/images/pathfinder32_hard.png
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "lsformer/data/pathfinder.h"
#include "lsformer/data/pathfinder_generate.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& pathfinder_flags() {
  static const std::vector<Flag> table = {
      {"--out", "DIR", "where imgs/ and metadata/ are written (created)"},
      {"--size", "N", "image side: 32, 64 or 128 (default 32)"},
      {"--difficulty", "D", "baseline (6 dashes), 9 or 14 (default 14; the LRA task's)"},
      {"--count", "N", "images (default 20000); labels alternate, so they are balanced"},
      {"--seed", "S", "generator seed (default 0); image i depends only on (size, difficulty, seed, i)"},
      {"--batch-size", "N", "images per imgs/<batch> folder and metadata file (default 1000)"},
      {"--sheet", "PNG", "also (or only, without --out) write a 4×8 contact sheet: positives on top"},
  };
  return table;
}

data::PathfinderDifficulty parse_difficulty(const std::string& text) {
  if (text == "baseline" || text == "curv_baseline") return data::PathfinderDifficulty::Baseline;
  if (text == "9" || text == "curv_contour_length_9") return data::PathfinderDifficulty::Length9;
  if (text == "14" || text == "curv_contour_length_14") return data::PathfinderDifficulty::Length14;
  throw UsageError("--difficulty must be baseline, 9 or 14, got '" + text + "'");
}

}  // namespace

void data_pathfinder_usage(std::ostream& os) {
  os << "pathfinder: LRA's Pathfinder images (two marker discs, curvy dashed contours, distractors; label 1 when\n"
        "the markers lie on one contour), generated offline (docs/data-formats.md §1.4.6) in the release layout.\n\n";
  print_flags(os, pathfinder_flags());
}

int run_data_pathfinder(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, pathfinder_flags());
  const std::string out = flag_value(parsed, "--out"), sheet = flag_value(parsed, "--sheet");
  if (out.empty() && sheet.empty()) throw UsageError("--out (or --sheet) is required");
  if (!sheet.empty() && std::filesystem::path(sheet).extension() != ".png")
    throw UsageError("--sheet writes a PNG: name it *.png, got '" + sheet + "'");
  data::PathfinderOptions options;
  options.size = parse_int("--size", flag_value(parsed, "--size", "32"), 32, 128);
  if (options.size != 32 && options.size != 64 && options.size != 128)
    throw UsageError("--size must be 32, 64 or 128, got " + std::to_string(options.size));
  options.difficulty = parse_difficulty(flag_value(parsed, "--difficulty", "14"));
  options.seed = uint64_t(parse_int("--seed", flag_value(parsed, "--seed", "0"), 0, int64_t(1) << 62));
  const int64_t count = parse_int("--count", flag_value(parsed, "--count", "20000"), 1, int64_t(1) << 32);
  const int64_t batch = parse_int("--batch-size", flag_value(parsed, "--batch-size", "1000"), 1, int64_t(1) << 32);
  if (!out.empty()) {
    const int64_t positives = data::write_pathfinder_dataset(out, options, count, batch);
    std::cout << "wrote " << count << " " << options.size << "×" << options.size << " "
              << data::kPathfinderDifficultyNames[int(options.difficulty)] << " images (" << positives
              << " connected) under " << out << "\n";
  }
  if (!sheet.empty()) {
    int64_t height = 0, width = 0;
    const std::vector<uint8_t> pixels = data::pathfinder_contact_sheet(options, 4, 8, /*zoom=*/128 / options.size, &height, &width);
    data::write_gray_png(sheet, pixels, height, width);
    std::cout << "wrote " << sheet << " (" << width << "×" << height
              << "; top two rows connected, bottom two not)\n";
  }
  return 0;
}

}  // namespace lsf::cli
