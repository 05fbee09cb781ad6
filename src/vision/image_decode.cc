// JPEG (TurboJPEG) and PNG (libspng) to 8-bit RGB; see include/stoker/image.h.
#include "stoker/image.h"

#include <spng.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>
#include <string>

#include "vision/jpeg_runs.h"

namespace stoker {

namespace {

bool IsJpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }

bool IsPng(const uint8_t* d, size_t n) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(d, kSig, 8) == 0;
}

Status Unknown(const uint8_t* d, size_t n) {
  if (n == 0) return Status::DataLoss("empty image (0 bytes)");
  std::string head;
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < n && i < 8; ++i) {
    head += kHex[d[i] >> 4];
    head += kHex[d[i] & 15];
  }
  return Status::DataLoss("not a JPEG or PNG image (" + std::to_string(n) + " bytes starting " + head +
                          "); stoker.vision decodes JPEG and PNG");
}

// ---- JPEG --------------------------------------------------------------------

// One TurboJPEG handle per thread: handles are not thread-safe, and making
// one per image costs more than a small decode.
tjhandle JpegHandle() {
  struct Handle {
    tjhandle h = tjInitDecompress();
    ~Handle() {
      if (h) tjDestroy(h);
    }
  };
  thread_local Handle handle;
  return handle.h;
}

Status JpegError(tjhandle h, const char* what) {
  return Status::DataLoss(std::string("corrupt JPEG (") + what + "): " + tjGetErrorStr2(h));
}

// Whether the JPEG has an Adobe APP14 segment (before the first scan).
// Photoshop writes CMYK inverted and says so with it; PIL reads such
// files as "CMYK;I", and so do we.
bool HasAdobeMarker(const uint8_t* d, size_t n) {
  size_t at = 2;
  while (at + 4 <= n) {
    if (d[at] != 0xFF) return false;
    const uint8_t marker = d[at + 1];
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return false;  // start of scan / end of image
    const size_t len = (static_cast<size_t>(d[at + 2]) << 8) | d[at + 3];
    if (marker == 0xEE && len >= 7 && at + 4 + 5 <= n && std::memcmp(d + at + 4, "Adobe", 5) == 0) return true;
    at += 2 + len;
  }
  return false;
}

// PIL's cmyk2rgb: r = (255 - k) - (c * (255 - k) + 128) / 255, rounded as
// its MULDIV255 rounds.
inline uint8_t MulDiv255(uint32_t a, uint32_t b) {
  const uint32_t t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

Result<ImageInfo> DecodeJpeg(const uint8_t* d, size_t n, uint64_t max_pixels, std::vector<uint8_t>* rgb) {
  if (Status runs = JpegRuns(); !runs.ok()) return runs;
  tjhandle h = JpegHandle();
  if (!h) return Status::ResourceExhausted("TurboJPEG: cannot make a decompressor");
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, d, static_cast<unsigned long>(n), &w, &ht, &subsamp, &colorspace) != 0)
    return JpegError(h, "header");
  STOKER_RETURN_IF_ERROR(CheckImagePixels(ht, w, max_pixels));
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const size_t px = static_cast<size_t>(w) * static_cast<size_t>(ht);
  thread_local std::vector<uint8_t> cmyk_buf;
  uint8_t* out;
  if (cmyk) {
    cmyk_buf.resize(px * 4);
    out = cmyk_buf.data();
  } else {
    rgb->resize(px * 3);
    out = rgb->data();
  }
  // Default flags: accurate integer IDCT and smooth ("fancy") upsampling,
  // as PIL decodes, so the pixels equal PIL's.
  if (tjDecompress2(h, d, static_cast<unsigned long>(n), out, w, 0, ht, cmyk ? TJPF_CMYK : TJPF_RGB, 0) != 0) {
    // libjpeg warns and pads with grey where PIL refuses; its other warnings
    // (extraneous bytes before a marker) PIL passes, and so do we.
    const bool warning = tjGetErrorCode(h) == TJERR_WARNING;
    const char* msg = tjGetErrorStr2(h);
    if (!warning || std::strstr(msg, "Premature end") != nullptr) {
      if (std::strstr(msg, "Premature end") != nullptr)
        return Status::DataLoss(std::string("truncated JPEG: ") + msg);
      return JpegError(h, "data");
    }
  }
  if (cmyk) {
    const bool inverted = HasAdobeMarker(d, n);
    rgb->resize(px * 3);
    uint8_t* o = rgb->data();
    const uint8_t* c = cmyk_buf.data();
    for (size_t i = 0; i < px; ++i, c += 4, o += 3) {
      const uint32_t k = inverted ? 255u - c[3] : c[3];
      const uint32_t nk = 255 - k;
      for (int j = 0; j < 3; ++j) {
        const uint32_t v = inverted ? 255u - c[j] : c[j];
        o[j] = static_cast<uint8_t>(nk - MulDiv255(v, nk));
      }
    }
  }
  return ImageInfo{ImageFormat::kJpeg, ht, w};
}

// ---- PNG ---------------------------------------------------------------------

struct SpngFree {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};

Status PngError(int err, const char* what) {
  return Status::DataLoss(std::string("corrupt PNG (") + what + "): " + spng_strerror(err));
}

Result<ImageInfo> DecodePng(const uint8_t* d, size_t n, uint64_t max_pixels, std::vector<uint8_t>* rgb) {
  std::unique_ptr<spng_ctx, SpngFree> ctx(spng_ctx_new(0));
  if (!ctx) return Status::ResourceExhausted("libspng: cannot make a decoder");
  // Chunks beyond the image data (text, ICC) are capped so a crafted file
  // cannot make libspng allocate without bound.
  spng_set_chunk_limits(ctx.get(), 64u << 20, 64u << 20);
  int err = spng_set_png_buffer(ctx.get(), d, n);
  if (err) return PngError(err, "buffer");
  spng_ihdr ihdr{};
  if ((err = spng_get_ihdr(ctx.get(), &ihdr))) return PngError(err, "header");
  STOKER_RETURN_IF_ERROR(CheckImagePixels(ihdr.height, ihdr.width, max_pixels));
  size_t bytes = 0;
  if ((err = spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &bytes))) return PngError(err, "size");
  rgb->resize(bytes);
  // RGB8 from any PNG: palette looked up, grey repeated, alpha dropped and
  // 16-bit samples cut to their high byte, as PIL's convert("RGB") does.
  if ((err = spng_decode_image(ctx.get(), rgb->data(), bytes, SPNG_FMT_RGB8, 0))) {
    if (err == SPNG_EOF) return Status::DataLoss("truncated PNG: " + std::string(spng_strerror(err)));
    return PngError(err, "data");
  }
  return ImageInfo{ImageFormat::kPng, static_cast<int64_t>(ihdr.height), static_cast<int64_t>(ihdr.width)};
}

}  // namespace

Status CheckImagePixels(int64_t height, int64_t width, uint64_t max_pixels) {
  if (height <= 0 || width <= 0)
    return Status::DataLoss("image header gives a size of " + std::to_string(width) + "x" + std::to_string(height));
  const uint64_t px = static_cast<uint64_t>(height) * static_cast<uint64_t>(width);
  if (px > max_pixels)
    return Status::DataLoss("image of " + std::to_string(width) + "x" + std::to_string(height) + " = " +
                            std::to_string(px) + " pixels is above the limit of " + std::to_string(max_pixels) +
                            " (a decompression bomb?); raise max_image_pixels if the image is genuine");
  return Status::OK();
}

Result<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size) {
  if (IsJpeg(data, size)) {
    if (Status runs = JpegRuns(); !runs.ok()) return runs;
    tjhandle h = JpegHandle();
    if (!h) return Status::ResourceExhausted("TurboJPEG: cannot make a decompressor");
    int w = 0, ht = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &w, &ht, &subsamp, &colorspace) != 0)
      return JpegError(h, "header");
    return ImageInfo{ImageFormat::kJpeg, ht, w};
  }
  if (IsPng(data, size)) {
    std::unique_ptr<spng_ctx, SpngFree> ctx(spng_ctx_new(0));
    if (!ctx) return Status::ResourceExhausted("libspng: cannot make a decoder");
    spng_set_png_buffer(ctx.get(), data, size);
    spng_ihdr ihdr{};
    if (int err = spng_get_ihdr(ctx.get(), &ihdr)) return PngError(err, "header");
    return ImageInfo{ImageFormat::kPng, static_cast<int64_t>(ihdr.height), static_cast<int64_t>(ihdr.width)};
  }
  return Unknown(data, size);
}

Result<ImageInfo> DecodeImage(const uint8_t* data, size_t size, uint64_t max_pixels, std::vector<uint8_t>* rgb) {
  if (IsJpeg(data, size)) return DecodeJpeg(data, size, max_pixels, rgb);
  if (IsPng(data, size)) return DecodePng(data, size, max_pixels, rgb);
  return Unknown(data, size);
}

}  // namespace stoker
