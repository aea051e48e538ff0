// vision::check_images: the input contract shared by every image classifier.
#include "lsformer/models/vision/classifier.h"

namespace lsf::vision {

void check_images(const char* model, const Tensor& images, const ImageSpec& spec) {
  LSF_CHECK(images.defined()) << model << ": the images are undefined";
  LSF_CHECK(images.dim() == 4 && images.size(1) == spec.in_channels && images.size(2) == spec.image_size &&
            images.size(3) == spec.image_size)
      << model << ": expected images [B, " << spec.in_channels << ", " << spec.image_size << ", " << spec.image_size
      << "] (the model was built for " << spec.in_channels << "-channel " << spec.image_size << "×"
      << spec.image_size << " images), got shape " << images.shape();
  LSF_CHECK(images.dtype() == kF32 || images.dtype() == kF64)
      << model << ": expected f32 images, got " << images.dtype() << " (convert with .to(kF32))";
}

}  // namespace lsf::vision
