// DecodeJpegBox (include/stoker/image.h): libjpeg-turbo's libjpeg API, for
// what its TurboJPEG API (2.1) lacks: jpeg_skip_scanlines and
// jpeg_crop_scanline.  libjpeg reports errors by calling error_exit, which
// must not return: it longjmps back here, so no object with a destructor
// lives in a frame the jump crosses.
#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <string>

#include <jerror.h>
#include <jpeglib.h>

#include "stoker/image.h"
#include "vision/jpeg_runs.h"

namespace stoker {

namespace {

struct JpegErrors {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

[[noreturn]] void OnError(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings: libjpeg pads a truncated file with grey and warns; that one is
// an error for us (PIL refuses it), the others pass (as PIL passes them).
void OnMessage(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) e->truncated = true;
}

// Everything that touches libjpeg, with C types only (see the top).  The
// box comes from choose(arg, height, width, &box) once the header is read.
// Returns 0 on success, 1 for a libjpeg error (message in errs), 2 where a
// whole decode is needed (no box, a colour space it does not cover), 3
// above the pixel limit, 4 for rows missing.  *height, *width: the image's.
int Decode(const uint8_t* data, size_t size, bool (*choose)(const void*, int64_t, int64_t, ImageBox*),
           const void* choose_arg, uint64_t max_pixels, JpegErrors* errs, jpeg_decompress_struct* cinfo,
           uint8_t* (*grow)(void*, size_t), void* grow_arg, int64_t* height, int64_t* width, ImageBox* got) {
  cinfo->err = jpeg_std_error(&errs->mgr);
  errs->mgr.error_exit = OnError;
  errs->mgr.emit_message = OnMessage;
  errs->truncated = false;
  if (setjmp(errs->jump)) {
    jpeg_destroy_decompress(cinfo);
    return 1;
  }
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  *height = cinfo->image_height;
  *width = cinfo->image_width;
  if (static_cast<uint64_t>(*height) * static_cast<uint64_t>(*width) > max_pixels) {
    jpeg_destroy_decompress(cinfo);
    return 3;
  }
  ImageBox want;
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK ||
      !choose(choose_arg, *height, *width, &want) || want.top < 0 || want.left < 0 ||
      want.top + want.height > *height || want.left + want.width > *width || want.height <= 0 || want.width <= 0) {
    jpeg_destroy_decompress(cinfo);
    return 2;
  }
  cinfo->out_color_space = JCS_RGB;  // (defaults otherwise: PIL's islow IDCT, fancy upsampling)
  jpeg_start_decompress(cinfo);
  // Columns: a margin on each side, so the smooth chroma upsampling at the
  // edges of what is decoded (it lacks the neighbours there) stays outside
  // the box; libjpeg-turbo then widens to whole blocks.
  const int64_t left = std::max<int64_t>(0, want.left - 1);
  const int64_t right = std::min<int64_t>(cinfo->output_width, want.left + want.width + 16);
  JDIMENSION xoff = static_cast<JDIMENSION>(left), cols = static_cast<JDIMENSION>(right - left);
  if (xoff != 0 || cols != cinfo->output_width) jpeg_crop_scanline(cinfo, &xoff, &cols);
  const size_t row = static_cast<size_t>(cinfo->output_width) * 3;
  uint8_t* out = grow(grow_arg, row * static_cast<size_t>(want.height));
  if (want.top > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(want.top));
  JDIMENSION done = 0;
  while (done < static_cast<JDIMENSION>(want.height)) {
    JSAMPROW rows[1] = {out + done * row};
    if (jpeg_read_scanlines(cinfo, rows, 1) != 1) break;
    ++done;
  }
  got->top = want.top;
  got->left = xoff;
  got->height = done;
  got->width = cinfo->output_width;
  jpeg_abort_decompress(cinfo);  // the rows below are not wanted
  jpeg_destroy_decompress(cinfo);
  return done == static_cast<JDIMENSION>(want.height) ? 0 : 4;
}

uint8_t* Grow(void* v, size_t n) {
  auto* vec = static_cast<std::vector<uint8_t>*>(v);
  vec->resize(n);
  return vec->data();
}

bool Choose(const void* f, int64_t height, int64_t width, ImageBox* box) {
  return (*static_cast<const ChooseBox*>(f))(height, width, box);
}

}  // namespace

Result<ImageBox> DecodeJpegBox(const uint8_t* data, size_t size, const ChooseBox& choose, uint64_t max_pixels,
                               std::vector<uint8_t>* rgb, ImageInfo* info) {
  if (Status runs = JpegRuns(); !runs.ok()) return runs;
  // A file cut short below the box would pass unnoticed: without its end
  // marker (EOI) near the end, it is decoded whole, which names the damage.
  bool ends = false;
  for (size_t i = size >= 2 ? size - 2 : 0, stop = size > 64 ? size - 64 : 0; i + 1 < size && i >= stop; --i) {
    if (data[i] == 0xFF && data[i + 1] == 0xD9) {
      ends = true;
      break;
    }
    if (i == 0) break;
  }
  if (!ends) return Status::InvalidArgument("no end marker: decode it whole");
  JpegErrors errs{};
  jpeg_decompress_struct cinfo{};
  ImageBox got;
  int64_t height = 0, width = 0;
  const int code = Decode(data, size, Choose, &choose, max_pixels, &errs, &cinfo, Grow, rgb, &height, &width, &got);
  switch (code) {
    case 0:
    case 4:
      break;
    case 1:
      return Status::DataLoss(std::string("corrupt JPEG: ") + errs.message);
    case 2:
      return Status::InvalidArgument("no box to decode, or a CMYK JPEG: decode it whole");
    default:
      return CheckImagePixels(height, width, max_pixels);
  }
  if (code == 4 || errs.truncated) return Status::DataLoss("truncated JPEG: Premature end of JPEG file");
  *info = ImageInfo{ImageFormat::kJpeg, height, width};
  return got;
}

}  // namespace stoker
