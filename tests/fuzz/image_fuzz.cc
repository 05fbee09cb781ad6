// libFuzzer target: JPEG and PNG decoding (header, pixels, the pixel limit)
// and the transform plan on whatever decodes, with the first byte choosing
// the random word.
#include <cstdint>
#include <vector>

#include "stoker/image.h"
#include "stoker/image_transforms.h"

using namespace stoker;

namespace {

const ImagePipeline& Train() {
  static const auto p = [] {
    ImageOp rrc{ImageOp::Kind::kRandomResizedCrop};
    rrc.height = rrc.width = 24;
    ImageOp flip{ImageOp::Kind::kHorizontalFlip};
    ImageOp cast{ImageOp::Kind::kToDtype};
    cast.scale = true;
    ImageOp norm{ImageOp::Kind::kNormalize};
    norm.mean = {0.5};
    norm.stddev = {0.25};
    return ImagePipeline::Make({rrc, flip, cast, norm}).value();
  }();
  return *p;
}

const ImagePipeline& Eval() {
  static const auto p = [] {
    ImageOp resize{ImageOp::Kind::kResize};
    resize.height = 20;  // shorter side
    ImageOp crop{ImageOp::Kind::kCenterCrop};
    crop.height = crop.width = 32;  // larger than some images: padding
    return ImagePipeline::Make({resize, crop}).value();
  }();
  return *p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint64_t random = data[0];
  ++data;
  --size;
  (void)ReadImageInfo(data, size);
  std::vector<uint8_t> rgb;
  // A small pixel limit keeps the fuzzer on the decoders, not on memset.
  Result<ImageInfo> info = DecodeImage(data, size, 1 << 20, &rgb);
  if (!info.ok()) return 0;
  const int64_t h = info.value().height, w = info.value().width;
  if (rgb.size() != static_cast<size_t>(h * w * 3)) __builtin_trap();
  for (const ImagePipeline* p : {&Train(), &Eval()}) {
    int64_t oh = 0, ow = 0;
    p->OutputSize(h, w, &oh, &ow);
    std::vector<uint8_t> out(static_cast<size_t>(3 * oh * ow) * ElementSize(p->dtype()));
    (void)p->Run(rgb.data(), h, w, random, out.data());
  }
  return 0;
}
