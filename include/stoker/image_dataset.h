// Image datasets (stoker.vision): a NativeDataset whose encoded images
// (one variable-length bytes field of a base dataset: files of a folder,
// members of tar shards, records of a streaming dataset) are decoded and
// transformed by the reader threads, written CHW into the batch slot.
#ifndef STOKER_IMAGE_DATASET_H_
#define STOKER_IMAGE_DATASET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/image.h"
#include "stoker/image_transforms.h"
#include "stoker/native_dataset.h"

namespace stoker {

class ImageDataset : public NativeDataset {
 public:
  // `image_field` of `base` must be a variable uint8 field.  A null
  // transform (an empty pipeline) decodes only: 3 x H x W uint8.  The image field is fixed-shape
  // (3, h, w) when the transform gives every image one size; otherwise
  // variable (each sample's CHW values, flat).
  static Result<std::shared_ptr<ImageDataset>> Make(std::shared_ptr<NativeDataset> base, const std::string& image_field,
                                                    std::shared_ptr<const ImagePipeline> transform,
                                                    uint64_t max_pixels = kDefaultMaxImagePixels);

  uint64_t size() const override { return base_->size(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  std::string DescribeSample(uint64_t index) const override { return base_->DescribeSample(index); }
  SampleStructure structure() const override { return base_->structure(); }
  Status BeginEpoch(uint64_t epoch) override;
  std::vector<int64_t> Order(const OrderRecipe& o) override { return base_->Order(o); }
  void Interrupt() override { base_->Interrupt(); }
  std::string EpochState() const override { return base_->EpochState(); }
  Status RestoreEpoch(const std::string& state) override { return base_->RestoreEpoch(state); }
  void SetEpoch(uint64_t epoch) override;
  // The loader's seed (drawn from its generator each epoch): with the epoch
  // and the index it makes each sample's random word.
  void SetSeed(uint64_t seed) override { seed_.store(seed, std::memory_order_relaxed); }

  // Sample `index` with the random word `random` instead of the seeded one
  // (a Python __getitem__ outside stoker's loader draws it from torch's
  // generator).  The image's height and width go to *h, *w.
  Status ReadWith(uint64_t index, uint64_t random, uint8_t* const* dst, int64_t* h, int64_t* w);
  uint64_t RandomWord(uint64_t index) const;
  size_t image_field() const { return field_; }
  const ImagePipeline* transform() const { return transform_.get(); }

 private:
  ImageDataset() = default;
  // Reads sample `index` of the base, whose fields' sizes are `sizes`
  // (its SampleBytes): the encoded image to *encoded (thread-local), the
  // other fields to dst.
  Status ReadBase(uint64_t index, const uint64_t* sizes, uint8_t* const* dst, const std::vector<uint8_t>** encoded);
  Status Fail(uint64_t index, const Status& why) const;

  std::shared_ptr<NativeDataset> base_;
  std::shared_ptr<const ImagePipeline> transform_;
  size_t field_ = 0;
  uint64_t max_pixels_ = kDefaultMaxImagePixels;
  std::vector<FieldSpec> fields_;
  std::atomic<uint64_t> seed_{0};
};

// Image files as samples, as torchvision's ImageFolder lists them (the
// listing is the caller's: stoker.vision.ImageFolder walks the folders):
// items (3 x h x w image, int64 label), batches [images, labels].  Errors
// name the file.
Result<std::shared_ptr<ImageDataset>> ImageFolderDataset(std::vector<std::string> paths, std::vector<int64_t> labels,
                                                        std::shared_ptr<const ImagePipeline> transform,
                                                        uint64_t max_pixels = kDefaultMaxImagePixels);

}  // namespace stoker

#endif  // STOKER_IMAGE_DATASET_H_
