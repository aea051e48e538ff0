// Throughput of the image loader alone (data/image_loader.h): how many images per second the
// decoding + augmentation pipeline delivers with 0, 1, 2, … worker threads, and — with
// --step-ms — how long a consumer that "trains" for that many milliseconds per batch still
// waits for data (0 means the model never waits).
//
//   bench_image_loader --fashion-mnist                      Debian's Fashion-MNIST, 28×28 gray
//   bench_image_loader --make-jpeg-folder DIR [--count N]   writes N ImageNet-sized JPEGs first
//   bench_image_loader --folder DIR                         any root/<class>/<image> folder
// Other flags: --image-size, --batch-size, --batches, --workers 0,1,2, --eval, --step-ms, --help.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lsformer/data/idx.h"
#include "lsformer/data/image_decode.h"
#include "lsformer/data/image_folder.h"
#include "lsformer/data/image_loader.h"
#include "lsformer/data/sample_random.h"

using namespace lsf;
using namespace lsf::data;

namespace {

struct Options {
  bool fashion_mnist = false;
  std::string folder, make_folder;
  int64_t count = 512;  // images written by --make-jpeg-folder
  int64_t image_size = 0;  // 0: 28 for Fashion-MNIST, 224 for folders
  int64_t batch_size = 128;
  int64_t batches = 10;
  std::vector<int> workers = {0, 1, 2};
  bool eval = false;
  double step_ms = 0;
};

struct Flag {
  const char* name;
  const char* arg;
  const char* help;
  std::function<void(Options&, const std::string&)> set;
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--fashion-mnist", nullptr, "use Debian's Fashion-MNIST train split (60,000 28×28 gray)",
       [](Options& o, const std::string&) { o.fashion_mnist = true; }},
      {"--folder", "DIR", "use the image folder DIR (root/<class>/<image>)",
       [](Options& o, const std::string& v) { o.folder = v; }},
      {"--make-jpeg-folder", "DIR", "write --count JPEGs of 500×375 in 8 classes under DIR, then use it",
       [](Options& o, const std::string& v) { o.make_folder = v; }},
      {"--count", "N", "images for --make-jpeg-folder (default 512)",
       [](Options& o, const std::string& v) { o.count = std::stoll(v); }},
      {"--image-size", "S", "output size (default 28 for Fashion-MNIST, 224 for folders)",
       [](Options& o, const std::string& v) { o.image_size = std::stoll(v); }},
      {"--batch-size", "B", "images per batch (default 128)",
       [](Options& o, const std::string& v) { o.batch_size = std::stoll(v); }},
      {"--batches", "N", "batches timed per worker count (default 10)",
       [](Options& o, const std::string& v) { o.batches = std::stoll(v); }},
      {"--workers", "LIST", "worker counts to time, comma-separated (default 0,1,2)",
       [](Options& o, const std::string& v) { o.workers = parse_list(v); }},
      {"--eval", nullptr, "the evaluation pipeline (resize + centre crop) instead of the training recipe",
       [](Options& o, const std::string&) { o.eval = true; }},
      {"--step-ms", "MS", "simulate a training step of MS milliseconds per batch and report the wait",
       [](Options& o, const std::string& v) { o.step_ms = std::stod(v); }},
  };
  return table;
}

void usage() {
  std::cout << "bench_image_loader: images/s of the image loader alone\n";
  for (const Flag& f : flags())
    std::cout << "  " << f.name << (f.arg ? std::string(" ") + f.arg : "") << "\n      " << f.help << "\n";
}

// ImageNet-like JPEGs: 500×375 (ImageNet's most common size), smooth colours plus noise so
// they compress like photographs (~40–60 KB at quality 90).
void make_jpeg_folder(const std::string& root, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const std::filesystem::path dir = std::filesystem::path(root) / ("class_" + std::to_string(i % 8));
    std::filesystem::create_directories(dir);
    Image image(375, 500, 3);
    SampleRandom r(1, 9, i, 0);
    for (int64_t y = 0; y < 375; ++y)
      for (int64_t x = 0; x < 500; ++x)
        for (int64_t c = 0; c < 3; ++c)
          image.at(y, x, c) = uint8_t((x * (c + 1) / 3 + y * (3 - c) / 2 + i * 17) % 200 + r.randint(0, 55));
    write_jpeg((dir / ("img_" + std::to_string(i) + ".jpg")).string(), image, 90);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        usage();
        return 0;
      }
      const Flag* flag = nullptr;
      for (const Flag& f : flags())
        if (a == f.name) flag = &f;
      if (flag == nullptr) throw Error("unknown flag " + a + " (see --help)");
      std::string value;
      if (flag->arg) {
        if (++i >= argc) throw Error(a + " needs a value");
        value = argv[i];
      }
      flag->set(o, value);
    }
    std::shared_ptr<ImageDataset> dataset;
    ImagePipelineOptions p;
    p.train = !o.eval;
    if (!o.make_folder.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      make_jpeg_folder(o.make_folder, o.count);
      std::printf("wrote %lld JPEGs under %s in %.1f s\n", (long long)o.count, o.make_folder.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      o.folder = o.make_folder;
    }
    if (!o.folder.empty()) {
      dataset = std::make_shared<ImageFolderDataset>(o.folder);
      p.image_size = o.image_size > 0 ? o.image_size : 224;
    } else {
      dataset = read_fashion_mnist(find_fashion_mnist(), "train");
      p.image_size = o.image_size > 0 ? o.image_size : 28;
      p.mean = {0.2860f};  // Fashion-MNIST's own statistics (train split)
      p.std = {0.3530f};
    }
    const ImagePipeline pipeline(p, dataset->num_classes());
    std::printf("dataset: %s, %lld images, %lld classes; %s pipeline at %lld×%lld, batch %lld, %lld batches\n",
                dataset->name().c_str(), (long long)dataset->size(), (long long)dataset->num_classes(),
                p.train ? "training (ViL-LS recipe)" : "evaluation", (long long)p.image_size,
                (long long)p.image_size, (long long)o.batch_size, (long long)o.batches);
    std::printf("%8s %12s %12s %14s %14s%s\n", "workers", "images/s", "ms/batch", "compute ms/b", "wait ms/b",
                o.step_ms > 0 ? "  wait after 1st" : "");
    for (int workers : o.workers) {
      ImageLoader loader(dataset, pipeline,
                         {.batch_size = o.batch_size, .seed = 1, .num_workers = workers, .prefetch = 2 * std::max(1, workers)});
      loader.batch(0);  // warm-up: page in the files and the allocator
      double seconds = 0, first_wait = 0;
      LoaderStats stats;
      if (o.step_ms > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        loader.start(1, 1 + o.batches);
        for (int64_t k = 0; k < o.batches; ++k) {
          loader.next();
          if (k == 0) first_wait = loader.stats().wait_seconds;  // nothing can be ready ahead of it
          std::this_thread::sleep_for(std::chrono::microseconds(int64_t(o.step_ms * 1000)));
        }
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        stats = loader.stats();
        loader.stop();
      } else {
        stats = time_loader(loader, o.batches, &seconds, 1);
      }
      std::printf("%8d %12.0f %12.1f %14.1f %14.1f", workers, double(o.batches * o.batch_size) / seconds,
                  1e3 * seconds / double(o.batches), 1e3 * stats.compute_seconds / double(o.batches),
                  1e3 * stats.wait_seconds / double(o.batches));
      if (o.step_ms > 0 && o.batches > 1)
        std::printf(" %16.1f", 1e3 * (stats.wait_seconds - first_wait) / double(o.batches - 1));
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_image_loader: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
