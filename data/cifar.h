// CIFAR-10 and CIFAR-100, binary versions, as RGB images (data-formats.md §1.5).
//
// CIFAR-10 files (data_batch_{1..5}.bin, test_batch.bin): records of 1 label byte (0..9) then
// 3072 pixel bytes: the 32×32 R plane, then G, then B, each row-major (C×H×W). CIFAR-100 files
// (train.bin, test.bin): 1 coarse label byte (0..19), 1 fine label byte (0..99), then the same
// 3072 bytes. Images are returned as 32×32×3 (H×W×C, data/image_dataset.h); every file's size
// must be a positive multiple of the record size.
//
// Class names come from the label-name files beside the first batch file when present
// (batches.meta.txt; fine_label_names.txt / coarse_label_names.txt), else CIFAR-10's ten
// built-in names, or "0", "1", ... for CIFAR-100.
// (The LRA task's grayscale sequences are data/image.h; that reader is unchanged.)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lsformer/data/image_dataset.h"

namespace lsf::data {

constexpr int64_t kCifar100RecordBytes = 2 + 3 * 1024;  // coarse + fine label, R, G, B planes

std::shared_ptr<InMemoryImageDataset> read_cifar10(const std::vector<std::string>& batch_files);

enum class Cifar100Labels { Fine, Coarse };
std::shared_ptr<InMemoryImageDataset> read_cifar100(const std::vector<std::string>& files,
                                                    Cifar100Labels labels = Cifar100Labels::Fine);

}  // namespace lsf::data
