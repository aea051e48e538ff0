// The vision family for the trainer (models/train/task.h): data.task "image" — image
// classification with the models of models/vision (ViL-LS, CvT*-LS, the CNN baseline) on
// Fashion-MNIST (the default, installed offline by scripts/install-deps.sh), MNIST, CIFAR-10/100
// or an ImageNet-layout image folder, trained with the ViL-LS recipe of data/image_pipeline.h
// (docs/transformer-ls.md §4.5) or any part of it.
//
//   RunConfig c = load_config("configs/vision/quick.json");
//   const VisionSections& s = vision_sections(c);
//   std::unique_ptr<Task> task = make_task(c);              // a VisionTask
//
// Splits (data.source → where train / dev / test come from):
//   fashion_mnist, mnist  data.path (empty: Debian's Fashion-MNIST; MNIST needs a path) holding
//                         {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]: train = the first
//                         (1 − dev_fraction) of the 60,000 training images, dev = the rest, test = t10k
//   cifar10               data.path = cifar-10-batches-bin: data_batch_1..5.bin split the same way,
//                         test_batch.bin
//   cifar100              data.path = cifar-100-binary: train.bin split the same way, test.bin (fine labels)
//   folder                data.path/train/<class>/... (ImageNet's layout); dev = data.path/val when it
//                         exists, else the last dev_fraction of train; test = data.path/test when it
//                         exists, else data.path/val (ImageNet reports its validation set)
// The dev split is never shuffled out of the training order: "the last 10%" is a fixed set.
//
// Training batch k is the ImageLoader's batch k (data/image_loader.h): a pure function of (config,
// k), so a resumed run sees the batches an uninterrupted one does; the loader streams from the
// step the trainer asks for, on data.workers threads, data.prefetch batches ahead. Loss:
// soft_cross_entropy against the Mixup/CutMix targets when mixing is on, else cross-entropy
// with data.label_smoothing. Evaluation: the evaluation transform (resize to ⌊S/crop_pct⌋, centre
// crop S), top-1 and top-5 accuracy over the whole split (top-1 selects checkpoints).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/data/image_dataset.h"
#include "lsformer/data/image_ops.h"
#include "lsformer/data/image_pipeline.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"
#include "lsformer/models/vision/factory.h"

namespace lsf::train {

enum class ImageSource { FashionMnist, Mnist, Cifar10, Cifar100, Folder };
inline constexpr const char* kImageSourceNames[] = {"fashion_mnist", "mnist", "cifar10", "cifar100", "folder"};
// data::Interpolation's enumerators (resizing supports bilinear and bicubic only).
inline constexpr const char* kInterpolationNames[] = {"nearest", "bilinear", "bicubic"};

// The "data" section of the image task (data.task itself is RunConfig::task). The augmentation
// keys are ImagePipelineOptions' (data/image_pipeline.h); their defaults are the ViL-LS recipe.
struct VisionDataConfig {
  ImageSource source = ImageSource::FashionMnist;
  std::string path;              // see above; empty: the installed Fashion-MNIST (source fashion_mnist only)
  double dev_fraction = 0.1;     // sources without a dev split: the last fraction of train, in (0, 1)
  int64_t image_size = 0;        // S; 0: the images' own size (28 MNIST-family, 32 CIFAR; folder: required)
  int64_t channels = 0;          // 0: the source's (1 MNIST-family, 3 otherwise); 1 or 3: converted
  data::Interpolation interpolation = data::Interpolation::Bicubic;
  std::vector<double> mean;      // [C] normalisation; empty: the source's constants (see mean_std())
  std::vector<double> std;       // [C]
  // training augmentation
  bool random_resized_crop = true;
  std::array<double, 2> crop_scale{0.08, 1.0};            // area fraction
  std::array<double, 2> crop_ratio{3.0 / 4.0, 4.0 / 3.0};  // width / height
  double hflip = 0.5;            // probability
  std::string rand_augment = "rand-m9-mstd0.5-inc1";  // timm config string; "" = off
  double color_jitter = 0.4;     // brightness = contrast = saturation strength; only without RandAugment
  bool force_color_jitter = false;
  double erasing = 0.25;         // random-erasing probability
  double mixup = 0.8;            // Mixup alpha (0 = off)
  double cutmix = 1.0;           // CutMix alpha (0 = off)
  double mix_prob = 1.0;         // probability a batch is mixed
  double switch_prob = 0.5;      // P(CutMix) when both alphas are > 0
  double label_smoothing = 0.1;  // in the mixed targets, or in the cross-entropy without mixing
  // evaluation
  double crop_pct = 0.875;       // resize the shorter side to ⌊S / crop_pct⌋, centre crop S
  // loading
  int64_t eval_batch_size = 0;   // evaluation batches; 0: train.batch_size
  int64_t workers = 2;           // loader threads (0: batches built on the training thread)
  int64_t prefetch = 4;          // batches built ahead
};

// The "model" section: a classifier name (models/vision/factory.h) and its training options.
struct VisionModelConfig {
  std::string name = "vil:l1,h2,d64,n1,s1,g1,p2,f7,a0,r4_l2,h4,d128,n2,s0,g0,p2,f7,a0";
  int64_t num_classes = 0;       // 0: the data's
  int64_t in_channels = 0;       // 0: the data's (data.channels or the source's)
  double drop_path = 0.0;        // ViL, CvT*-LS (vision::ClassifierOptions); the presets' training
  double drop_rate = 0.0;        //   rates are in configs/vision/*.json, not implied by the name
  bool qkv_bias = true;          // ViL, CvT*-LS
  bool dual_ln = true;           // ViL, CvT*-LS: false is the paper's "w/o DualLN" ablation
  int64_t kv_stride = 1;         // CvT*-LS only (models/vision/cvt_ls_attention.h)
  int64_t dp_kernel = 3;         // CvT*-LS only
  bool batch_norm_projection = false;  // CvT*-LS only
};

struct VisionSections final : TaskSections {
  VisionDataConfig data;
  VisionModelConfig model;
  std::unique_ptr<TaskSections> clone() const override { return std::make_unique<VisionSections>(*this); }
  void visit(FieldVisitor& v) override;
};

// The vision sections of a config (an error naming the task when it is not "image").
const VisionSections& vision_sections(const RunConfig& config);

// What the source fixes without reading it: classes (0 for folders: the class folders decide),
// channels and image side (0 for folders).
struct SourceFacts {
  int64_t num_classes = 0, channels = 0, image_size = 0;
};
SourceFacts source_facts(ImageSource source);

// The normalisation constants: data.mean / data.std when set, else the source's (Fashion-MNIST
// 0.2860 / 0.3530, MNIST 0.1307 / 0.3081, CIFAR-10 and CIFAR-100 their per-channel values,
// folders ImageNet's), for `channels` output channels.
std::pair<std::vector<float>, std::vector<float>> mean_std(const VisionDataConfig& data, int64_t channels);

// The pipeline options of the config (training or evaluation transform) for images of `channels`.
data::ImagePipelineOptions pipeline_options(const RunConfig& config, bool training, int64_t channels);

// The image spec (classes, side, channels) of the model: the model keys, else the data's; a
// config that leaves one to data it cannot know without reading (a folder's classes) needs `data`.
vision::ImageSpec image_spec(const RunConfig& config, const data::ImageDataset* data);
vision::ClassifierOptions classifier_options(const RunConfig& config);

// Bytes autograd keeps for one training batch of `batch` images, float32, from the model's
// architecture alone (the right order of magnitude; tests/test_memory_estimate.cpp compares it
// with the allocator's measured peak). Per transformer stage of nx² patch tokens (+ g global),
// width d, h heads and n blocks: transformer_activation_bytes with each query's key span — r
// projected + T² window (T = w + 2·max(⌊w/2⌋, 1), docs/transformer-ls.md §4.2) + g global slots for
// long-short attention, every token for full attention — plus the long-short attention's
// gathered T×T key and value blocks and regrouped queries (≈ (2·T²/w² + 2)·d per token), plus
// the patch embedding's convolution and norm outputs. Per CNN convolution: its output, batch
// norm and ReLU (3 maps), and each pooling's output and indices.
double vision_activation_bytes(const vision::ImageClassifier& model, double batch);

// One split ("train", "dev", "test") of the configured source.
std::shared_ptr<const data::ImageDataset> load_image_split(const RunConfig& config, const std::string& split);

// Ranks of the labels among the logits: correct1/correct5 count the rows whose label is the
// top-1 / among the top-min(5, K) (ties broken by the lower class index, as argmax).
struct TopK {
  int64_t correct1 = 0, correct5 = 0;
};
TopK count_top_k(const Tensor& logits, const Tensor& labels);  // logits [B, K], labels [B] i64

}  // namespace lsf::train
