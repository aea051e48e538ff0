// Image readers on tiny files each test writes itself: PNG decoding of every colour type and
// depth (exact), JPEG decoding (within a tolerance of a smooth pattern), channel conversion,
// image folders (class order, labels, lazy decoding), CIFAR-10/100 and IDX (plain and .gz)
// records, per-channel statistics, the real Fashion-MNIST from Debian's package (counts, labels,
// its known mean/std) — and every error path naming the file.
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <jpeglib.h>

#include <cmath>

#include "lsformer/data/cifar.h"
#include "lsformer/data/image_decode.h"
#include "lsformer/data/image_folder.h"
#include "lsformer/data/idx.h"
#include "helpers.h"
#include "image_test_files.h"

using namespace lsf;
using namespace lsf::data;
using test::TempDir;

namespace {

// A smooth RGB pattern (JPEG keeps it within a few levels at high quality).
Image smooth_pattern(int64_t h, int64_t w) {
  Image image(h, w, 3);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      image.at(y, x, 0) = uint8_t(40 + 160 * x / (w - 1));
      image.at(y, x, 1) = uint8_t(200 - 150 * y / (h - 1));
      image.at(y, x, 2) = uint8_t(90 + (x + y) * 2);
    }
  return image;
}

int max_abs_diff(const Image& a, const Image& b) {
  REQUIRE(a.pixels.size() == b.pixels.size());
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return worst;
}

std::vector<uint32_t> ramp(size_t n, uint32_t mul, uint32_t mod) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint32_t(i * mul % mod);
  return v;
}

}  // namespace

TEST_CASE("PNG: every colour type and depth decodes exactly", "[data][image]") {
  TempDir dir("png");
  // 8-bit RGB, read as RGB and as gray (PIL's luma).
  const auto rgb = ramp(4 * 3 * 3, 37, 256);
  test::write_png_raw(dir / "rgb.png", 4, 3, PNG_COLOR_TYPE_RGB, 8, rgb);
  const Image a = decode_image_file(dir / "rgb.png", 3);
  CHECK(a.height == 3);
  CHECK(a.width == 4);
  CHECK(a.channels == 3);
  CHECK(std::vector<uint32_t>(a.pixels.begin(), a.pixels.end()) == rgb);
  const Image a_gray = decode_image_file(dir / "rgb.png", 1);
  REQUIRE(a_gray.channels == 1);
  for (int64_t p = 0; p < 12; ++p)
    CHECK(a_gray.pixels[size_t(p)] == luma_601(uint8_t(rgb[3 * p]), uint8_t(rgb[3 * p + 1]), uint8_t(rgb[3 * p + 2])));

  // 8-bit gray, replicated into RGB.
  const auto gray = ramp(5 * 2, 29, 256);
  test::write_png_raw(dir / "gray.png", 5, 2, PNG_COLOR_TYPE_GRAY, 8, gray);
  const Image g = decode_image_file(dir / "gray.png", 3);
  for (int64_t p = 0; p < 10; ++p)
    for (int c = 0; c < 3; ++c) CHECK(g.pixels[size_t(3 * p + c)] == gray[size_t(p)]);

  // 1-, 2- and 4-bit gray expand to 0..255 (v · 255 / (2^d − 1)).
  for (int depth : {1, 2, 4}) {
    const uint32_t top = (1u << depth) - 1;
    const auto values = ramp(7, 1, top + 1);
    test::write_png_raw(dir / "low.png", 7, 1, PNG_COLOR_TYPE_GRAY, depth, values);
    const Image low = decode_image_file(dir / "low.png", 1);
    for (size_t i = 0; i < 7; ++i) CHECK(low.pixels[i] == values[i] * 255 / top);
  }

  // 16-bit RGB and gray: the high byte.
  const auto deep = ramp(2 * 2 * 3, 9973, 65536);
  test::write_png_raw(dir / "rgb16.png", 2, 2, PNG_COLOR_TYPE_RGB, 16, deep);
  const Image d = decode_image_file(dir / "rgb16.png", 3);
  for (size_t i = 0; i < deep.size(); ++i) CHECK(d.pixels[i] == deep[i] >> 8);
  test::write_png_raw(dir / "gray16.png", 3, 1, PNG_COLOR_TYPE_GRAY, 16, {0, 300, 65535});
  CHECK(decode_image_file(dir / "gray16.png", 1).pixels == std::vector<uint8_t>{0, 1, 255});

  // RGBA and gray + alpha: the alpha is dropped, never composited (PIL's convert("RGB")).
  test::write_png_raw(dir / "rgba.png", 2, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, {10, 20, 30, 0, 40, 50, 60, 128});
  CHECK(decode_image_file(dir / "rgba.png", 3).pixels == std::vector<uint8_t>{10, 20, 30, 40, 50, 60});
  test::write_png_raw(dir / "ga.png", 2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, {77, 0, 200, 255});
  CHECK(decode_image_file(dir / "ga.png", 1).pixels == std::vector<uint8_t>{77, 200});

  // Palette (with tRNS transparency, also dropped), 2-bit indices.
  const std::vector<png_color> palette = {{255, 0, 0}, {0, 128, 0}, {1, 2, 3}};
  test::write_png_raw(dir / "pal.png", 4, 1, PNG_COLOR_TYPE_PALETTE, 2, {0, 1, 2, 1}, palette, {0, 255, 128});
  CHECK(decode_image_file(dir / "pal.png", 3).pixels ==
        std::vector<uint8_t>{255, 0, 0, 0, 128, 0, 1, 2, 3, 0, 128, 0});
  CHECK(decode_image_file(dir / "pal.png", 1).pixels ==
        std::vector<uint8_t>{luma_601(255, 0, 0), luma_601(0, 128, 0), luma_601(1, 2, 3), luma_601(0, 128, 0)});

  // Interlaced (Adam7) gives the same pixels.
  test::write_png_raw(dir / "inter.png", 4, 3, PNG_COLOR_TYPE_RGB, 8, rgb, {}, {}, /*interlace=*/true);
  CHECK(decode_image_file(dir / "inter.png", 3).pixels == a.pixels);

  // The library's own writer round-trips exactly.
  write_png(dir / "round.png", a);
  CHECK(decode_image_file(dir / "round.png", 3).pixels == a.pixels);
}

TEST_CASE("JPEG: decoding within the codec's tolerance, gray and CMYK", "[data][image]") {
  TempDir dir("jpeg");
  const Image pattern = smooth_pattern(24, 32);
  write_jpeg(dir / "rgb.jpg", pattern, 95);
  const Image back = decode_image_file(dir / "rgb.jpg", 3);
  REQUIRE(back.height == 24);
  REQUIRE(back.width == 32);
  REQUIRE(back.channels == 3);
  // Quality 95 with 4:2:0 chroma on a smooth ramp: measured worst error 6 levels (libjpeg-turbo
  // 2.1.5); 8 leaves room for another IDCT's rounding, while a wrong channel order or colour
  // conversion would be off by tens.
  CHECK(max_abs_diff(back, pattern) <= 8);

  // Gray JPEG: one channel, replicated when asked for RGB.
  const Image gray = convert_channels(pattern, 1);
  write_jpeg(dir / "gray.jpg", gray, 95);
  const Image gray_back = decode_image_file(dir / "gray.jpg", 1);
  CHECK(max_abs_diff(gray_back, gray) <= 4);  // no chroma subsampling: measured 1 (DCT quantisation)
  const Image gray_rgb = decode_image_file(dir / "gray.jpg", 3);
  for (int64_t p = 0; p < 24 * 32; ++p) CHECK(gray_rgb.pixels[size_t(3 * p + 1)] == gray_back.pixels[size_t(p)]);

  // A flat CMYK JPEG written by libjpeg (with its Adobe marker): PIL's rule reads the stored
  // values as inverted, then R = (255 − K) − C·(255 − K)/255.
  {
    jpeg_compress_struct cinfo;
    jpeg_error_mgr err;
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_compress(&cinfo);
    std::FILE* f = std::fopen((dir / "cmyk.jpg").c_str(), "wb");
    REQUIRE(f != nullptr);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = 16;
    cinfo.image_height = 8;
    cinfo.input_components = 4;
    cinfo.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, 100, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    std::vector<uint8_t> row(16 * 4);
    for (int x = 0; x < 16; ++x) {
      row[size_t(4 * x)] = 155;      // stored C: C = 100 after un-inverting
      row[size_t(4 * x + 1)] = 255;  // M = 0
      row[size_t(4 * x + 2)] = 55;   // Y = 200
      row[size_t(4 * x + 3)] = 205;  // K = 50
    }
    while (cinfo.next_scanline < cinfo.image_height) {
      JSAMPROW r = row.data();
      jpeg_write_scanlines(&cinfo, &r, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    std::fclose(f);
  }
  const Image cmyk = decode_image_file(dir / "cmyk.jpg", 3);
  // nK = 205: R = 205 − 100·205/255 = 124.6, G = 205, B = 205 − 200·205/255 = 44.2.
  const int expected[3] = {125, 205, 44};
  int worst = 0;
  for (int64_t p = 0; p < 16 * 8; ++p)
    for (int c = 0; c < 3; ++c) worst = std::max(worst, std::abs(int(cmyk.pixels[size_t(3 * p + c)]) - expected[c]));
  CHECK(worst <= 2);  // quality 100, flat colour: only rounding in the DCT and the conversion
}

TEST_CASE("image decoding errors name the file and the problem", "[data][image]") {
  TempDir dir("bad");
  // Noise compresses badly, so most of the file is scan data: cutting it in half cuts the scan
  // (libjpeg's "premature end" warning, an error here); cutting in the headers is an error too.
  Image noise(64, 64, 3);
  for (size_t i = 0; i < noise.pixels.size(); ++i) noise.pixels[i] = uint8_t(i * 2654435761u >> 13);
  write_jpeg(dir / "good.jpg", noise, 90);
  const std::string jpeg = test::read_bytes(dir / "good.jpg");
  CHECK(decode_image_file(dir / "good.jpg", 3).height == 64);
  test::write_bytes(dir / "truncated.jpg", jpeg.substr(0, jpeg.size() / 2));
  CHECK_THROWS_WITH(decode_image_file(dir / "truncated.jpg", 3),
                    Catch::Contains("truncated.jpg") && Catch::Contains("corrupt or truncated"));
  test::write_bytes(dir / "headers.jpg", jpeg.substr(0, 100));
  CHECK_THROWS_WITH(decode_image_file(dir / "headers.jpg", 3),
                    Catch::Contains("headers.jpg") && Catch::Contains("not a readable JPEG"));
  std::string garbage = jpeg.substr(0, 4) + std::string(200, '\x17');
  test::write_bytes(dir / "garbage.jpg", garbage);
  CHECK_THROWS_WITH(decode_image_file(dir / "garbage.jpg", 3),
                    Catch::Contains("garbage.jpg") && Catch::Contains("not a readable JPEG"));

  write_png(dir / "good.png", smooth_pattern(8, 8));
  const std::string png = test::read_bytes(dir / "good.png");
  test::write_bytes(dir / "truncated.png", png.substr(0, png.size() - 30));
  CHECK_THROWS_WITH(decode_image_file(dir / "truncated.png", 3),
                    Catch::Contains("truncated.png") && Catch::Contains("not a readable PNG"));
  std::string bad_crc = png;
  bad_crc[20] = char(bad_crc[20] ^ 0x5A);  // inside IHDR: its CRC no longer matches
  test::write_bytes(dir / "crc.png", bad_crc);
  CHECK_THROWS_WITH(decode_image_file(dir / "crc.png", 3), Catch::Contains("crc.png"));

  test::write_bytes(dir / "empty.jpg", "");
  CHECK_THROWS_WITH(decode_image_file(dir / "empty.jpg", 3), Catch::Contains("empty.jpg") && Catch::Contains("empty"));
  test::write_bytes(dir / "text.png", "hello, not an image");
  CHECK_THROWS_WITH(decode_image_file(dir / "text.png", 3),
                    Catch::Contains("text.png") && Catch::Contains("neither a JPEG nor a PNG"));
  CHECK_THROWS_WITH(decode_image_file(dir / "absent.jpg", 3),
                    Catch::Contains("absent.jpg") && Catch::Contains("does not exist"));
  std::filesystem::create_directories(dir / "folder.jpg");
  CHECK_THROWS_WITH(decode_image_file(dir / "folder.jpg", 3),
                    Catch::Contains("folder.jpg") && Catch::Contains("directory"));
  CHECK_THROWS_WITH(decode_image_file(dir / "good.png", 2), Catch::Contains("channels must be 1"));
  // A PNG named .jpg (as one ImageNet file is) is decoded by its signature.
  std::filesystem::copy_file(dir / "good.png", dir / "png_named.jpg");
  CHECK(decode_image_file(dir / "png_named.jpg", 3).pixels == decode_image_file(dir / "good.png", 3).pixels);
}

TEST_CASE("image folder: sorted classes, torchvision's labels and order, lazy decoding", "[data][image]") {
  TempDir dir("folder");
  Image red(2, 3, 3, 0), blue(2, 3, 3, 0);
  for (int64_t p = 0; p < 6; ++p) {
    red.pixels[size_t(3 * p)] = 250;
    blue.pixels[size_t(3 * p + 2)] = 250;
  }
  const auto root = dir.path() / "train";
  for (const char* sub : {"a_class", "b_class/sub", "c_class"}) std::filesystem::create_directories(root / sub);
  write_png((root / "b_class" / "z.png").string(), red);
  write_png((root / "b_class" / "a.png").string(), blue);
  write_png((root / "b_class" / "sub" / "c.png").string(), red);  // nested: after b_class/*.png
  write_jpeg((root / "a_class" / "x.JPEG").string(), red, 95);    // upper-case extension counts
  test::write_bytes((root / "a_class" / "notes.txt").string(), "not an image");
  test::write_bytes((root / "loose.png").string(), "files under root are ignored");
  test::write_bytes((root / "c_class" / "broken.png").string(), "corrupt");

  ImageFolderDataset d(root.string());
  CHECK(d.class_names() == std::vector<std::string>{"a_class", "b_class", "c_class"});
  CHECK(d.num_classes() == 3);
  CHECK(d.channels() == 3);
  REQUIRE(d.size() == 5);
  CHECK(d.path(0) == (root / "a_class" / "x.JPEG").string());
  CHECK(d.path(1) == (root / "b_class" / "a.png").string());
  CHECK(d.path(2) == (root / "b_class" / "z.png").string());
  CHECK(d.path(3) == (root / "b_class" / "sub" / "c.png").string());
  CHECK(d.path(4) == (root / "c_class" / "broken.png").string());
  CHECK(std::vector<int32_t>{d.label(0), d.label(1), d.label(2), d.label(3), d.label(4)} ==
        std::vector<int32_t>{0, 1, 1, 1, 2});
  CHECK(d.image(1).pixels == blue.pixels);
  CHECK(d.image(2).pixels == red.pixels);
  // The corrupt file only fails when it is read, and names itself.
  CHECK_THROWS_WITH(d.image(4), Catch::Contains("broken.png"));
  CHECK_THROWS_WITH(d.image(5), Catch::Contains("index 5"));
  // One channel on request.
  ImageFolderDataset g(root.string(), {.channels = 1});
  CHECK(g.image(1).pixels == std::vector<uint8_t>(6, luma_601(0, 0, 250)));

  std::filesystem::create_directories(root / "d_empty");
  CHECK_THROWS_WITH(ImageFolderDataset(root.string()), Catch::Contains("d_empty") && Catch::Contains("no image"));
  CHECK_THROWS_WITH(ImageFolderDataset((dir.path() / "nothing").string()),
                    Catch::Contains("nothing") && Catch::Contains("not a directory"));
  std::filesystem::create_directories(dir.path() / "flat");  // images, but no class folder
  write_png((dir.path() / "flat" / "a.png").string(), red);
  CHECK_THROWS_WITH(ImageFolderDataset((dir.path() / "flat").string()), Catch::Contains("no class folders"));
}

TEST_CASE("CIFAR-10 and CIFAR-100 binary records to RGB images", "[data][image]") {
  TempDir dir("cifar");
  auto record = [](std::vector<uint8_t> labels, int seed) {
    std::string r(labels.begin(), labels.end());
    for (int i = 0; i < 3072; ++i) r.push_back(char((i * 7 + seed * 31) % 256));
    return r;
  };
  test::write_bytes(dir / "data_batch_1.bin", record({3}, 0) + record({9}, 1));
  test::write_bytes(dir / "data_batch_2.bin", record({0}, 2));
  auto c10 = read_cifar10({dir / "data_batch_1.bin", dir / "data_batch_2.bin"});
  {
    // Channel statistics over the 3 images: plane c's bytes are ((c·1024 + p)·7 + 31·seed) % 256.
    double sum = 0, sum_sq = 0;
    for (int seed = 0; seed < 3; ++seed)
      for (int p = 0; p < 1024; ++p) {
        const double v = ((1024 + p) * 7 + seed * 31) % 256 / 255.0;  // channel 1 (green)
        sum += v;
        sum_sq += v * v;
      }
    const ChannelStats stats = channel_stats(*c10);
    const double mean = sum / 3072;
    CHECK(std::fabs(stats.mean[1] - mean) < 1e-6);  // float32 of a double result
    CHECK(std::fabs(stats.std[1] - std::sqrt(sum_sq / 3072 - mean * mean)) < 1e-6);
  }
  REQUIRE(c10->size() == 3);
  CHECK(c10->height() == 32);
  CHECK(c10->channels() == 3);
  CHECK(c10->label(0) == 3);
  CHECK(c10->label(1) == 9);
  CHECK(c10->label(2) == 0);
  CHECK(c10->class_names()[3] == "cat");
  // Pixel (y, x, c) of record 1 is plane c's byte y·32 + x (CHW on disk → HWC).
  const Image im = c10->image(1);
  for (int64_t y : {0, 5, 31})
    for (int64_t x : {0, 17, 31})
      for (int64_t c = 0; c < 3; ++c) CHECK(int(im.at(y, x, c)) == int(((c * 1024 + y * 32 + x) * 7 + 31) % 256));
  CHECK(c10->describe(2) == "'" + (dir / "data_batch_2.bin") + "' record 0");

  test::write_bytes(dir / "batches.meta.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
  CHECK(read_cifar10({dir / "data_batch_2.bin"})->class_names()[9] == "j");

  test::write_bytes(dir / "train.bin", record({4, 71}, 3) + record({19, 99}, 4));
  auto fine = read_cifar100({dir / "train.bin"});
  auto coarse = read_cifar100({dir / "train.bin"}, Cifar100Labels::Coarse);
  CHECK(fine->num_classes() == 100);
  CHECK(coarse->num_classes() == 20);
  CHECK(fine->label(0) == 71);
  CHECK(fine->label(1) == 99);
  CHECK(coarse->label(0) == 4);
  CHECK(coarse->label(1) == 19);
  CHECK(int(fine->image(1).at(0, 1, 0)) == (1 * 7 + 4 * 31) % 256);

  test::write_bytes(dir / "short.bin", record({1}, 0).substr(0, 3000));
  CHECK_THROWS_WITH(read_cifar10({dir / "short.bin"}),
                    Catch::Contains("short.bin") && Catch::Contains("3000 bytes") && Catch::Contains("3073"));
  test::write_bytes(dir / "label.bin", record({1}, 0) + record({10}, 0));
  CHECK_THROWS_WITH(read_cifar10({dir / "label.bin"}),
                    Catch::Contains("label.bin") && Catch::Contains("record 1") && Catch::Contains("label 10"));
  test::write_bytes(dir / "fine.bin", record({3, 100}, 0));
  CHECK_THROWS_WITH(read_cifar100({dir / "fine.bin"}), Catch::Contains("fine.bin") && Catch::Contains("label 100"));
  CHECK_THROWS_WITH(read_cifar100({dir / "data_batch_2.bin"}), Catch::Contains("3074"));  // a CIFAR-10 file
  CHECK_THROWS_WITH(read_cifar10({dir / "missing.bin"}), Catch::Contains("missing.bin"));
}

TEST_CASE("IDX files, plain and gzip-compressed, and their errors", "[data][image]") {
  TempDir dir("idx");
  std::string pixels;
  for (int i = 0; i < 3 * 4 * 5; ++i) pixels.push_back(char(i * 11 % 256));
  const std::string images = test::idx_header({3, 4, 5}) + pixels;
  const std::string labels = test::idx_header({3}) + std::string{7, 0, 9};
  test::write_bytes(dir / "train-images-idx3-ubyte", images);
  test::write_gz(dir / "train-labels-idx1-ubyte.gz", labels);  // one plain, one compressed
  auto d = read_mnist(dir.path().string(), "train");
  REQUIRE(d->size() == 3);
  CHECK(d->height() == 4);
  CHECK(d->width() == 5);
  CHECK(d->channels() == 1);
  CHECK(std::vector<int32_t>{d->label(0), d->label(1), d->label(2)} == std::vector<int32_t>{7, 0, 9});
  const Image second = d->image(1);
  for (int i = 0; i < 20; ++i) CHECK(int(second.pixels[size_t(i)]) == (20 + i) * 11 % 256);

  auto expect_error = [&](const std::string& name, const std::string& content, int64_t ndims, const char* what) {
    test::write_bytes(dir / name, content);
    CHECK_THROWS_WITH(read_idx_u8(dir / name, ndims), Catch::Contains(name) && Catch::Contains(what));
  };
  expect_error("magic", test::idx_header({3, 4, 5}, 0x09) + pixels, 3, "magic");
  expect_error("dims", test::idx_header({60}) + pixels, 3, "magic");  // labels where images were expected
  expect_error("cut", images.substr(0, images.size() - 7), 3, "truncated");
  expect_error("extra", images + "x", 3, "bytes after");
  expect_error("header", images.substr(0, 9), 3, "truncated inside its header");
  expect_error("tiny", std::string(2, '\0'), 3, "shorter than the 4-byte");
  test::write_gz(dir / "cut.gz", images);
  const std::string gz = test::read_bytes(dir / "cut.gz");
  expect_error("badgz.gz", gz.substr(0, gz.size() / 2), 3, "");
  CHECK_THROWS_WITH(read_idx_u8(dir / "badgz.gz", 3), Catch::Contains("badgz.gz"));
  CHECK_THROWS_WITH(read_idx_u8(dir / "nope", 1), Catch::Contains("nope") && Catch::Contains("does not exist"));

  test::write_bytes(dir / "t10k-images-idx3-ubyte", images);
  test::write_bytes(dir / "t10k-labels-idx1-ubyte", test::idx_header({2}) + std::string{1, 2});
  CHECK_THROWS_WITH(read_mnist(dir.path().string(), "test"), Catch::Contains("3 images") && Catch::Contains("2 labels"));
  test::write_bytes(dir / "t10k-labels-idx1-ubyte", test::idx_header({3}) + std::string{1, 2, 10});
  CHECK_THROWS_WITH(read_mnist(dir.path().string(), "test"), Catch::Contains("t10k-labels") && Catch::Contains("10"));
  CHECK_THROWS_WITH(read_mnist(dir.path().string(), "val"), Catch::Contains("split"));
  CHECK_THROWS_WITH(read_mnist((dir.path() / "none").string(), "train"), Catch::Contains("train-images-idx3-ubyte"));
}

TEST_CASE("Fashion-MNIST from Debian's dataset-fashion-mnist", "[data][image]") {
  if (!fashion_mnist_installed()) {
    CHECK_THROWS_WITH(find_fashion_mnist(), Catch::Contains("scripts/install-deps.sh"));
    WARN("skipped the real files: dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)");
    return;
  }
  const std::string dir = find_fashion_mnist();
  for (const auto& [split, count] : {std::pair{"train", 60000}, {"test", 10000}}) {
    auto d = read_fashion_mnist(dir, split);
    REQUIRE(d->size() == count);
    CHECK(d->height() == 28);
    CHECK(d->width() == 28);
    CHECK(d->channels() == 1);
    CHECK(d->class_names() == fashion_mnist_classes());
    std::vector<int64_t> per_class(10, 0);
    for (int64_t i = 0; i < d->size(); ++i) {
      const int32_t label = d->label(i);
      REQUIRE((label >= 0 && label < 10));
      ++per_class[size_t(label)];
    }
    // Fashion-MNIST is balanced: 6,000 / 1,000 images of each class.
    CHECK(per_class == std::vector<int64_t>(10, count / 10));
    if (std::string(split) == "train") {
      // Its widely quoted normalisation constants, to the 4 decimals they are quoted with.
      const ChannelStats stats = channel_stats(*d);
      CHECK(std::fabs(stats.mean[0] - 0.2860) < 5e-5);
      CHECK(std::fabs(stats.std[0] - 0.3530) < 5e-5);
    }
  }
}

TEST_CASE("ImageSubset: a range of another dataset with its labels and sources", "[data][image]") {
  // Five 1×2 gray images whose pixels and labels encode their index.
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  for (int i = 0; i < 5; ++i) {
    pixels.push_back(uint8_t(10 * i));
    pixels.push_back(uint8_t(10 * i + 1));
    labels.push_back(i % 3);
  }
  auto base = std::make_shared<InMemoryImageDataset>("five", 1, 2, 1, pixels, labels, std::vector<std::string>{"a", "b", "c"},
                                                     std::vector<InMemoryImageDataset::SourceRange>{{0, "five.bin"}});
  ImageSubset dev(base, 3, 5, "five dev");
  CHECK(dev.size() == 2);
  CHECK(dev.name() == "five dev");
  CHECK(dev.num_classes() == 3);
  CHECK(dev.channels() == 1);
  CHECK(dev.image(0).pixels == std::vector<uint8_t>{30, 31});
  CHECK(dev.label(1) == 1);  // base sample 4
  CHECK(dev.describe(1) == "'five.bin' record 4");
  CHECK_THROWS_WITH(dev.image(2), Catch::Contains("'five dev': index 2 is outside [0, 2)"));
  CHECK_THROWS_WITH(ImageSubset(base, 4, 6, "bad"), Catch::Contains("[4, 6)") && Catch::Contains("5 samples"));
  CHECK_THROWS_WITH(ImageSubset(base, 2, 2, "empty"), Catch::Contains("not a non-empty range"));
}
