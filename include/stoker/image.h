// Image decoding (stoker.vision): JPEG with libjpeg-turbo's TurboJPEG API,
// PNG with libspng, always to 8-bit RGB (height x width x 3, row-major) as
// PIL's Image.convert("RGB") gives it: grayscale repeated, alpha dropped,
// palette looked up, CMYK converted with PIL's formula.
//
// Thread-safe; no Python.  Every refusal is DataLoss (the readers' skip
// option can leave the sample out): truncated or corrupt data, an empty
// buffer, an unknown format, or more pixels than the limit (a decompression
// bomb, refused from the header before anything is allocated).
#ifndef STOKER_IMAGE_H_
#define STOKER_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "stoker/status.h"

namespace stoker {

enum class ImageFormat : uint8_t { kJpeg, kPng };

struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int64_t height = 0, width = 0;
};

// PIL refuses an image above 2 x Image.MAX_IMAGE_PIXELS (89,478,485) pixels
// as a decompression bomb; stoker does too by default.
inline constexpr uint64_t kDefaultMaxImagePixels = 2ull * 89478485ull;

// DataLoss unless 0 < height, width and height * width <= max_pixels (the
// decompression-bomb refusal every decoder makes from the header).
Status CheckImagePixels(int64_t height, int64_t width, uint64_t max_pixels);

// The format and size from the header, without decoding.
Result<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size);

// Decodes to RGB into `rgb` (resized to height * width * 3).  An image of
// more than `max_pixels` pixels is refused before anything is allocated.
Result<ImageInfo> DecodeImage(const uint8_t* data, size_t size, uint64_t max_pixels, std::vector<uint8_t>* rgb);

// A box of an image, in pixels.
struct ImageBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// Decodes only the part of a JPEG a crop keeps, with libjpeg-turbo's
// partial decoding: rows above the box are skipped (entropy-decoded only),
// rows below are never decoded, and columns outside it are not transformed.
// The pixels equal a whole decode's.  `choose(height, width, &box)` picks
// the box from the header's size (false: none).  libjpeg-turbo widens the
// columns to whole blocks: the return value is the box decoded (rows of its
// width, in `rgb`), which holds the chosen one; *info gets the image's
// size.  InvalidArgument where a whole decode is needed instead (no box
// chosen, CMYK, a file without its end marker).
using ChooseBox = std::function<bool(int64_t height, int64_t width, ImageBox* box)>;
Result<ImageBox> DecodeJpegBox(const uint8_t* data, size_t size, const ChooseBox& choose, uint64_t max_pixels,
                               std::vector<uint8_t>* rgb, ImageInfo* info);

}  // namespace stoker

#endif  // STOKER_IMAGE_H_
