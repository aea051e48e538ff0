// Test helpers that write image and dataset files in exact formats with the libraries
// themselves (libpng's full API for every PNG colour type and depth, zlib for .gz), into a
// fresh temporary directory per test. Used by tests/test_data_images.cpp.
#pragma once

#include <png.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace lsf::test {

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("lsf_" + tag + "_" + std::to_string(rd()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A PNG of any colour type and bit depth: `samples` holds H·W·channels values (16-bit values
// for depth 16), channels implied by the colour type; `palette` for PNG_COLOR_TYPE_PALETTE
// (samples are indices), `trns` optional alpha per palette entry.
inline void write_png_raw(const std::string& path, int width, int height, int color_type, int bit_depth,
                          const std::vector<uint32_t>& samples, const std::vector<png_color>& palette = {},
                          const std::vector<uint8_t>& trns = {}, bool interlace = false) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    FAIL("libpng failed writing " << path);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(width), png_uint_32(height), bit_depth, color_type,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), int(palette.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), int(trns.size()), nullptr);
  png_write_info(png, info);
  int channels = 1;
  if (color_type == PNG_COLOR_TYPE_RGB) channels = 3;
  if (color_type == PNG_COLOR_TYPE_RGB_ALPHA) channels = 4;
  if (color_type == PNG_COLOR_TYPE_GRAY_ALPHA) channels = 2;
  // Pack each row: sub-byte depths MSB first, 16-bit big-endian.
  const size_t row_bytes = (size_t(width) * channels * bit_depth + 7) / 8;
  std::vector<std::vector<uint8_t>> rows(size_t(height), std::vector<uint8_t>(row_bytes, 0));
  for (int y = 0; y < height; ++y)
    for (int i = 0; i < width * channels; ++i) {
      const uint32_t v = samples[size_t(y * width * channels + i)];
      auto& row = rows[size_t(y)];
      if (bit_depth == 16) {
        row[size_t(2 * i)] = uint8_t(v >> 8);
        row[size_t(2 * i + 1)] = uint8_t(v);
      } else if (bit_depth == 8) {
        row[size_t(i)] = uint8_t(v);
      } else {
        const int bit = i * bit_depth;
        row[size_t(bit / 8)] |= uint8_t(v << (8 - bit_depth - bit % 8));
      }
    }
  std::vector<png_bytep> pointers;
  for (auto& r : rows) pointers.push_back(r.data());
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

// `bytes` gzip-compressed into `path` through zlib.
inline void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// An IDX header: magic 00 00 08 <ndims>, then the big-endian sizes.
inline std::string idx_header(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  std::string h = {0, 0, char(type), char(dims.size())};
  for (uint32_t d : dims) {
    h.push_back(char(d >> 24));
    h.push_back(char(d >> 16));
    h.push_back(char(d >> 8));
    h.push_back(char(d));
  }
  return h;
}

}  // namespace lsf::test
