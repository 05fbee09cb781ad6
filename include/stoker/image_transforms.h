// Image transforms (stoker.vision) with torchvision.transforms.v2's names,
// parameters and semantics, run as one plan per image: crops are views,
// a resize computes only the window later crops keep, a flip is folded into
// the final write, and dtype conversion and normalisation happen as the
// image is written channel-first (CHW) into its place in the batch.
//
// Geometry runs on 8-bit RGB; ToDtype and Normalize come after it.
// Randomness is a function of one 64-bit word per sample (the loader derives
// it from its generator's seed, the epoch and the sample index), so the same
// word gives the same output on any thread.
#ifndef STOKER_IMAGE_TRANSFORMS_H_
#define STOKER_IMAGE_TRANSFORMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/image.h"
#include "stoker/native_dataset.h"
#include "stoker/status.h"

namespace stoker {

struct ImageOp {
  enum class Kind : uint8_t {
    kResize,             // height x width, or (width == 0) the shorter side to height
    kCenterCrop,         // height x width; zero padding where larger than the image
    kRandomCrop,         // height x width at a uniform offset (pad_if_needed: zeros around a small image)
    kRandomResizedCrop,  // torchvision's area/ratio sampling, then resize to height x width
    kHorizontalFlip,     // with probability p
    kToDtype,            // to dtype; scale: 0..255 -> 0..1 for floats
    kNormalize,          // (x - mean[c]) / std[c]; needs a float dtype
  };
  Kind kind = Kind::kResize;
  int64_t height = 0, width = 0;
  int64_t max_size = 0;  // kResize with a shorter side: cap on the longer (0: none)
  double scale_lo = 0.08, scale_hi = 1.0, ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;
  double p = 0.5;
  bool pad_if_needed = false;
  ElementType dtype = ElementType::kFloat32;
  bool scale = false;
  std::vector<double> mean, stddev;
  std::string Describe() const;
};

class ImagePipeline {
 public:
  // InvalidArgument naming the step for bad parameters or an order it
  // cannot run (ToDtype/Normalize before a geometric step, Normalize on uint8).
  static Result<std::shared_ptr<const ImagePipeline>> Make(std::vector<ImageOp> ops);

  ElementType dtype() const { return dtype_; }
  // Output height and width for an input of h x w (they never depend on the
  // random draws).
  void OutputSize(int64_t h, int64_t w, int64_t* oh, int64_t* ow) const;
  // Whether every input gives fixed_height() x fixed_width().
  bool fixed_size() const { return fixed_h_ > 0; }
  int64_t fixed_height() const { return fixed_h_; }
  int64_t fixed_width() const { return fixed_w_; }

  // Runs on RGB pixels (h x w x 3) and writes 3 x oh x ow of dtype() to
  // dst.  InvalidArgument if a step cannot apply (a RandomCrop larger than
  // the image).  Thread-safe.  With `box`, rgb holds only that box of the
  // h x w image (rows of box->width pixels), which must hold SourceBox's.
  Status Run(const uint8_t* rgb, int64_t h, int64_t w, uint64_t random, uint8_t* dst,
             const ImageBox* box = nullptr) const;
  // The part of an h x w image the steps read for `random`, where it is
  // less than the whole and known before decoding: the first step's crop
  // (RandomResizedCrop, RandomCrop, CenterCrop inside the image), or what a
  // first Resize reads for the crop that follows it.  Only that part needs
  // decoding.  False otherwise.
  bool SourceBox(int64_t h, int64_t w, uint64_t random, ImageBox* box) const;
  // Whether SourceBox can find a part for some image (by the steps alone):
  // a first crop, or a Resize and then a crop.
  bool ReadsPart() const;

  // The box (top, left, height, width) that step `step` (a
  // RandomResizedCrop) takes from an image of h x w at that
  // step for the word `random` (for tests of the sampling).
  Status CropBox(size_t step, int64_t h, int64_t w, uint64_t random, int64_t box[4]) const;

  std::string Describe() const;
  const std::vector<ImageOp>& ops() const { return ops_; }

 private:
  // Step `step`'s crop box on an ih x iw image when it lies inside the
  // image (false: a crop that pads, or not a crop).
  bool InsideCrop(size_t step, int64_t ih, int64_t iw, uint64_t random, ImageBox* box) const;
  void BuildTable();

  std::vector<ImageOp> ops_;
  ElementType dtype_ = ElementType::kUInt8;
  bool scale_ = false;
  std::vector<double> mean_, stddev_;  // 3 each, or empty
  size_t geometric_ = 0;               // ops_[0, geometric_) are geometric
  int64_t fixed_h_ = 0, fixed_w_ = 0;
  // value -> output element per channel, 3 x 256 elements of dtype_: the
  // conversions and the normalisation as one lookup.
  std::vector<uint8_t> table_;
};

}  // namespace stoker

#endif  // STOKER_IMAGE_TRANSFORMS_H_
