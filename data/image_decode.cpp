// JPEG (libjpeg-turbo) and PNG (libpng) decoding and encoding (data/image_decode.h).
//
// Error handling: both libraries report fatal errors through a handler that must not return.
// Ours copy the library's message into a plain struct and longjmp back to the setjmp in a
// function that holds only C objects (no destructors are skipped, which is what makes longjmp
// across it defined), frees what the library allocated, and returns false; its C++ caller then
// throws an lsf::Error naming the file. Output buffers are malloc'd inside and handed over.
#include "lsformer/data/image_decode.h"

#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "lsformer/data/file_util.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

constexpr size_t kMessageBytes = 256;
// The largest decoded image accepted: 512 MiB (a 13,000 × 13,000 RGB photograph), beyond any
// dataset image. A header is a few bytes that can declare 65,535 × 65,535 pixels; without a
// cap, a crafted file made us allocate gigabytes before reading any pixel (found by fuzzing).
constexpr double kMaxDecodedBytes = double(size_t(1) << 29);

// The raw result of a C-style decode: pixels malloc'd, interleaved, `components` per pixel.
struct RawPixels {
  uint8_t* pixels = nullptr;
  int64_t height = 0, width = 0, components = 0;
  bool adobe_inverted = false;  // JPEG CMYK/YCCK from an Adobe file: values stored inverted
};

// ---- JPEG ------------------------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr manager;  // first member: libjpeg hands us a pointer to it
  jmp_buf jump;
  char message[kMessageBytes];
  bool damaged = false;  // a warning that means damaged data was seen
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* error = reinterpret_cast<JpegError*>(cinfo->err);
  char buffer[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buffer);
  std::snprintf(error->message, kMessageBytes, "%s", buffer);
  std::longjmp(error->jump, 1);
}

// Warnings (level −1) that mean the data is damaged are remembered; trace messages are dropped.
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  auto* error = reinterpret_cast<JpegError*>(cinfo->err);
  const int code = cinfo->err->msg_code;
  if (!error->damaged && (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE)) {
    char buffer[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, buffer);
    std::snprintf(error->message, kMessageBytes, "%s", buffer);
    error->damaged = true;
  }
  cinfo->err->num_warnings++;
}

void jpeg_silent_output(j_common_ptr) {}

// Decodes to gray (1), RGB (3) or CMYK (4) components. False with error->message on failure.
bool jpeg_decode_raw(const uint8_t* data, size_t size, JpegError* error, RawPixels* out) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&error->manager);
  error->manager.error_exit = jpeg_error_exit;
  error->manager.emit_message = jpeg_emit_message;
  error->manager.output_message = jpeg_silent_output;
  out->pixels = nullptr;
  if (setjmp(error->jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::free(out->pixels);
    out->pixels = nullptr;
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (double(cinfo.image_width) * double(cinfo.image_height) * double(cinfo.num_components) > kMaxDecodedBytes) {
    std::snprintf(error->message, kMessageBytes, "%u×%u pixels × %d components exceed the 512 MiB a decoded image may take",
                  cinfo.image_width, cinfo.image_height, cinfo.num_components);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const J_COLOR_SPACE space = cinfo.jpeg_color_space;
  if (space == JCS_GRAYSCALE) {
    cinfo.out_color_space = JCS_GRAYSCALE;
  } else if (space == JCS_CMYK || space == JCS_YCCK) {
    cinfo.out_color_space = JCS_CMYK;
  } else {
    cinfo.out_color_space = JCS_RGB;
  }
  jpeg_start_decompress(&cinfo);
  out->height = cinfo.output_height;
  out->width = cinfo.output_width;
  out->components = cinfo.output_components;
  out->adobe_inverted = cinfo.saw_Adobe_marker && cinfo.out_color_space == JCS_CMYK;
  const size_t row_bytes = size_t(cinfo.output_width) * size_t(cinfo.output_components);
  out->pixels = static_cast<uint8_t*>(std::malloc(row_bytes * cinfo.output_height));
  if (out->pixels == nullptr) {
    std::snprintf(error->message, kMessageBytes, "out of memory for %u×%u pixels",
                  cinfo.output_width, cinfo.output_height);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->pixels + row_bytes * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

struct JpegOutput {
  unsigned char* buffer = nullptr;  // libjpeg's jpeg_mem_dest buffer: free()d by us
  unsigned long size = 0;
};

bool jpeg_encode_raw(const Image* image, int quality, JpegError* error, JpegOutput* out) {
  jpeg_compress_struct cinfo;
  cinfo.err = jpeg_std_error(&error->manager);
  error->manager.error_exit = jpeg_error_exit;
  error->manager.output_message = jpeg_silent_output;
  if (setjmp(error->jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out->buffer, &out->size);
  cinfo.image_width = JDIMENSION(image->width);
  cinfo.image_height = JDIMENSION(image->height);
  cinfo.input_components = int(image->channels);
  cinfo.in_color_space = image->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t row_bytes = size_t(image->width * image->channels);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(image->pixels.data()) + row_bytes * cinfo.next_scanline;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

// ---- PNG -------------------------------------------------------------------------------------

struct PngState {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t offset = 0;
  char message[kMessageBytes];
};

void png_error_handler(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, kMessageBytes, "%s", message);
  png_longjmp(png, 1);
}

void png_warning_handler(png_structp, png_const_charp) {}

void png_read_memory(png_structp png, png_bytep out, png_size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (state->size - state->offset < length) png_error(png, "file is truncated (read past its end)");
  std::memcpy(out, state->data + state->offset, length);
  state->offset += length;
}

// Decodes to gray (1) or RGB (3) components, 8 bits each. False with state->message on failure.
bool png_decode_raw(PngState* state, RawPixels* out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, state, png_error_handler,
                                           png_warning_handler);
  if (png == nullptr) {
    std::snprintf(state->message, kMessageBytes, "libpng could not allocate a reader");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  // Assigned after setjmp and read after a longjmp back to it: must not live in a register.
  png_bytepp volatile rows = nullptr;
  out->pixels = nullptr;
  if (info == nullptr) {
    std::snprintf(state->message, kMessageBytes, "libpng could not allocate an info struct");
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::free(static_cast<void*>(rows));
    std::free(out->pixels);
    out->pixels = nullptr;
    return false;
  }
  png_set_read_fn(png, state, png_read_memory);
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_strip_16(png);  // the high byte
  // tRNS transparency becomes an alpha channel when expanded (palettes always expand), so it is
  // turned into one explicitly and stripped with any real alpha channel.
  const bool transparency = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (transparency) png_set_tRNS_to_alpha(png);
  if ((color_type & PNG_COLOR_MASK_ALPHA) || transparency) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->height = png_get_image_height(png, info);
  out->width = png_get_image_width(png, info);
  out->components = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  if (double(row_bytes) * double(out->height) > kMaxDecodedBytes) {
    std::snprintf(state->message, kMessageBytes, "%lld×%lld pixels exceed the 512 MiB a decoded image may take",
                  static_cast<long long>(out->width), static_cast<long long>(out->height));
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  if ((out->components != 1 && out->components != 3) ||
      row_bytes != size_t(out->width * out->components)) {
    std::snprintf(state->message, kMessageBytes,
                  "unexpected layout after conversion (%d channels, %zu bytes per row)",
                  int(out->components), row_bytes);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  out->pixels = static_cast<uint8_t*>(std::malloc(row_bytes * size_t(out->height)));
  rows = static_cast<png_bytepp>(std::malloc(sizeof(png_bytep) * size_t(out->height)));
  if (out->pixels == nullptr || rows == nullptr) png_error(png, "out of memory");
  for (int64_t y = 0; y < out->height; ++y) rows[y] = out->pixels + size_t(y) * row_bytes;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  std::free(static_cast<void*>(rows));
  return true;
}

struct PngWriteState {
  std::FILE* file = nullptr;
  char message[kMessageBytes];
};

bool png_encode_raw(const Image* image, PngWriteState* state) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, state, png_error_handler,
                                            png_warning_handler);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, state->file);
  png_set_IHDR(png, info, png_uint_32(image->width), png_uint_32(image->height), 8,
               image->channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const size_t row_bytes = size_t(image->width * image->channels);
  for (int64_t y = 0; y < image->height; ++y)
    png_write_row(png, image->pixels.data() + size_t(y) * row_bytes);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

// ---- conversions -----------------------------------------------------------------------------

// PIL's MULDIV255: a·b/255 rounded, in integers.
inline int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

Image from_raw(RawPixels raw, int64_t channels) {
  Image image;
  image.height = raw.height;
  image.width = raw.width;
  const int64_t n = raw.height * raw.width;
  if (raw.components == 4) {  // CMYK → RGB (PIL's cmyk2rgb)
    image.channels = 3;
    image.pixels.resize(size_t(n * 3));
    for (int64_t p = 0; p < n; ++p) {
      int cmyk[4];
      for (int k = 0; k < 4; ++k) {
        const int v = raw.pixels[p * 4 + k];
        cmyk[k] = raw.adobe_inverted ? 255 - v : v;
      }
      const int nk = 255 - cmyk[3];
      for (int k = 0; k < 3; ++k) {
        const int v = nk - muldiv255(cmyk[k], nk);
        image.pixels[size_t(p * 3 + k)] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
  } else {
    image.channels = raw.components;
    image.pixels.assign(raw.pixels, raw.pixels + n * raw.components);
  }
  std::free(raw.pixels);
  return image.channels == channels ? image : convert_channels(image, channels);
}

void check_channels(int64_t channels, const char* who) {
  LSF_CHECK(channels == 1 || channels == 3)
      << who << ": channels must be 1 (gray) or 3 (RGB), got " << channels;
}

}  // namespace

uint8_t luma_601(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((uint32_t(r) * 19595u + uint32_t(g) * 38470u + uint32_t(b) * 7471u + 0x8000u) >> 16);
}

Image convert_channels(const Image& image, int64_t channels) {
  check_channels(channels, "convert_channels");
  LSF_CHECK(image.channels == 1 || image.channels == 3)
      << "convert_channels: the image has " << image.channels << " channels, expected 1 or 3";
  if (image.channels == channels) return image;
  Image out(image.height, image.width, channels);
  const int64_t n = image.height * image.width;
  const uint8_t* in = image.pixels.data();
  uint8_t* o = out.pixels.data();
  if (channels == 3) {
    for (int64_t p = 0; p < n; ++p) o[3 * p] = o[3 * p + 1] = o[3 * p + 2] = in[p];
  } else {
    for (int64_t p = 0; p < n; ++p) o[p] = luma_601(in[3 * p], in[3 * p + 1], in[3 * p + 2]);
  }
  return out;
}

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::Jpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::Png;
  return ImageFormat::Unknown;
}

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& what, int64_t channels) {
  check_channels(channels, "decode_jpeg");
  JpegError error;
  error.message[0] = '\0';
  RawPixels raw;
  if (!jpeg_decode_raw(data, size, &error, &raw))
    LSF_FAIL() << "decode_jpeg: '" << what << "' is not a readable JPEG: " << error.message;
  if (error.damaged) {
    std::free(raw.pixels);
    LSF_FAIL() << "decode_jpeg: '" << what << "' is corrupt or truncated: " << error.message;
  }
  return from_raw(raw, channels);
}

Image decode_png(const uint8_t* data, size_t size, const std::string& what, int64_t channels) {
  check_channels(channels, "decode_png");
  PngState state;
  state.data = data;
  state.size = size;
  state.message[0] = '\0';
  RawPixels raw;
  if (!png_decode_raw(&state, &raw))
    LSF_FAIL() << "decode_png: '" << what << "' is not a readable PNG: " << state.message;
  return from_raw(raw, channels);
}

Image decode_image(const uint8_t* data, size_t size, const std::string& what, int64_t channels) {
  LSF_CHECK(size > 0) << "decode_image: '" << what << "' is empty (0 bytes)";
  switch (sniff_image_format(data, size)) {
    case ImageFormat::Jpeg: return decode_jpeg(data, size, what, channels);
    case ImageFormat::Png: return decode_png(data, size, what, channels);
    case ImageFormat::Unknown: break;
  }
  LSF_FAIL() << "decode_image: '" << what << "' is neither a JPEG nor a PNG (its first bytes "
             << "are not a JPEG or PNG signature)";
}

Image decode_image_file(const std::string& path, int64_t channels) {
  const std::string bytes = read_file_bytes(path, "decode_image_file");
  return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path, channels);
}

namespace {
void check_writable_image(const Image& image, const char* who, const std::string& path) {
  LSF_CHECK((image.channels == 1 || image.channels == 3) && image.height > 0 && image.width > 0 &&
            int64_t(image.pixels.size()) == image.height * image.width * image.channels)
      << who << ": cannot write '" << path << "': the image is " << image.height << "×"
      << image.width << "×" << image.channels << " with " << image.pixels.size()
      << " bytes (need 1 or 3 channels and H·W·C bytes)";
}
}  // namespace

void write_png(const std::string& path, const Image& image) {
  check_writable_image(image, "write_png", path);
  PngWriteState state;
  state.message[0] = '\0';
  state.file = std::fopen(path.c_str(), "wb");
  LSF_CHECK(state.file != nullptr) << "write_png: cannot open '" << path << "' for writing: "
                                   << std::strerror(errno);
  const bool ok = png_encode_raw(&image, &state);
  const bool closed = std::fclose(state.file) == 0;
  LSF_CHECK(ok) << "write_png: libpng failed writing '" << path << "': " << state.message;
  LSF_CHECK(closed) << "write_png: cannot finish '" << path << "': " << std::strerror(errno);
}

void write_jpeg(const std::string& path, const Image& image, int quality) {
  check_writable_image(image, "write_jpeg", path);
  LSF_CHECK(quality >= 1 && quality <= 100)
      << "write_jpeg: quality must be in 1..100, got " << quality;
  JpegError error;
  error.message[0] = '\0';
  JpegOutput out;
  const bool ok = jpeg_encode_raw(&image, quality, &error, &out);
  if (!ok) {
    std::free(out.buffer);
    LSF_FAIL() << "write_jpeg: libjpeg failed encoding '" << path << "': " << error.message;
  }
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(out.buffer), std::streamsize(out.size));
  std::free(out.buffer);
  file.close();
  LSF_CHECK(file.good()) << "write_jpeg: cannot write '" << path << "'";
}

}  // namespace lsf::data
