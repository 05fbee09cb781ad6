// ImagePipeline: torchvision.transforms.v2's geometry and conversions as one
// plan per image (include/stoker/image_transforms.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

#include <immintrin.h>

#include "core/mix.h"
#include "io/half.h"
#include "stoker/image_transforms.h"
#include "vision/resample.h"

namespace stoker {

namespace {

using Kind = ImageOp::Kind;

bool Geometric(Kind k) { return k != Kind::kToDtype && k != Kind::kNormalize; }

bool IsFloat(ElementType t) {
  return t == ElementType::kFloat16 || t == ElementType::kBFloat16 || t == ElementType::kFloat32 ||
         t == ElementType::kFloat64;
}

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string List(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Num(v[i]);
  return s + "]";
}

// Each step's own stream of draws, from the sample's word.
class Draws {
 public:
  Draws(uint64_t random, size_t step) : state_(Mix64(random ^ Mix64(0x5157a9e5ull + step))) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ull); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // [0, n), n >= 1.
  int64_t Below(int64_t n) {
    return static_cast<int64_t>((static_cast<__uint128_t>(Next()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  uint64_t state_;
};

// Python's round(): half to even, as torchvision's center_crop uses it.
int64_t RoundHalfEven(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// torchvision's _compute_resized_output_size for a one-number size.
void ShorterSide(int64_t h, int64_t w, int64_t size, int64_t max_size, int64_t* oh, int64_t* ow) {
  const bool wide = w > h;
  const int64_t shorter = wide ? h : w, longer = wide ? w : h;
  int64_t new_short = size;
  auto new_long = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(longer) /
                                       static_cast<double>(shorter));
  if (max_size > 0 && new_long > max_size) {
    new_short = static_cast<int64_t>(static_cast<double>(max_size) * static_cast<double>(new_short) /
                                     static_cast<double>(new_long));
    new_long = max_size;
  }
  *oh = wide ? new_short : new_long;
  *ow = wide ? new_long : new_short;
}

// torchvision's RandomResizedCrop._get_params: ten tries at a box of a
// random area fraction and log-uniform aspect ratio, then a centre crop
// clamped to the ratio range.
void ResizedCropBox(const ImageOp& op, int64_t h, int64_t w, Draws* d, int64_t* top, int64_t* left, int64_t* ch,
                    int64_t* cw) {
  const double area = static_cast<double>(h) * static_cast<double>(w);
  const double log_lo = std::log(op.ratio_lo), log_hi = std::log(op.ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * d->Uniform(op.scale_lo, op.scale_hi);
    const double aspect = std::exp(d->Uniform(log_lo, log_hi));
    const int64_t bw = RoundHalfEven(std::sqrt(target * aspect));
    const int64_t bh = RoundHalfEven(std::sqrt(target / aspect));
    if (0 < bw && bw <= w && 0 < bh && bh <= h) {
      *top = d->Below(h - bh + 1);
      *left = d->Below(w - bw + 1);
      *ch = bh;
      *cw = bw;
      return;
    }
  }
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t bw = w, bh = h;
  if (in_ratio < std::min(op.ratio_lo, op.ratio_hi)) {
    bh = RoundHalfEven(static_cast<double>(w) / std::min(op.ratio_lo, op.ratio_hi));
  } else if (in_ratio > std::max(op.ratio_lo, op.ratio_hi)) {
    bw = RoundHalfEven(static_cast<double>(h) * std::max(op.ratio_lo, op.ratio_hi));
  }
  *top = (h - bh) / 2;
  *left = (w - bw) / 2;
  *ch = bh;
  *cw = bw;
}

// The image as the plan goes: `view` (stored pixels, never flipped),
// resized to rh x rw when `resized`, of which the window [top, top + h) x
// [left, left + w) is the current image, mirrored when `flip`.
class Plan {
 public:
  Plan(const uint8_t* rgb, int64_t h, int64_t w) : view_{rgb, h, w, w * 3}, h_(h), w_(w) {}
  // Only `box` of the h x w image is in rgb (rows of box.width pixels):
  // the steps must read inside it (ImagePipeline::SourceBox).
  Plan(const uint8_t* rgb, int64_t h, int64_t w, const ImageBox& box)
      : view_{rgb, h, w, box.width * 3, box.top, box.left, box.width}, h_(h), w_(w) {}
  int64_t height() const { return h_; }
  int64_t width() const { return w_; }
  void Flip() { flip_ = !flip_; }

  // A box of the current image (top, left in its coordinates), zeros
  // outside it.
  void Crop(int64_t top, int64_t left, int64_t ch, int64_t cw) {
    const int64_t sl = flip_ ? w_ - left - cw : left;  // in stored coordinates
    if (top >= 0 && sl >= 0 && top + ch <= h_ && sl + cw <= w_) {
      top_ += top;
      left_ += sl;
      h_ = ch;
      w_ = cw;
      return;
    }
    Settle();
    uint8_t* pad = Buffer(ch * cw * 3);
    std::memset(pad, 0, static_cast<size_t>(ch * cw * 3));
    const int64_t y0 = std::max<int64_t>(0, top), y1 = std::min(h_, top + ch);
    const int64_t x0 = std::max<int64_t>(0, sl), x1 = std::min(w_, sl + cw);
    for (int64_t y = y0; y < y1 && x0 < x1; ++y)
      std::memcpy(pad + ((y - top) * cw + (x0 - sl)) * 3, view_.Pixel(top_ + y, left_ + x0),
                  static_cast<size_t>((x1 - x0) * 3));
    view_ = {pad, ch, cw, cw * 3};
    top_ = left_ = 0;
    h_ = ch;
    w_ = cw;
  }

  void Resize(int64_t nh, int64_t nw) {
    if (nh == h_ && nw == w_) return;
    if (resized_) Settle();
    // The window becomes the source: a view, no copy.
    view_ = {view_.data,          h_, w_, view_.stride, view_.top - top_, view_.left - left_,
             view_.stored_end() - view_.left};
    resized_ = true;
    rh_ = nh;
    rw_ = nw;
    top_ = left_ = 0;
    h_ = nh;
    w_ = nw;
  }

  // The current image's stored rows (h x w x 3, `stride` apart).
  vision::RgbView Final() {
    Settle();
    return {view_.Pixel(top_, left_), h_, w_, view_.stride};
  }
  bool flipped() const { return flip_; }

 private:
  // Computes a pending resize (only the window's pixels).
  void Settle() {
    if (!resized_) return;
    uint8_t* out = Buffer(h_ * w_ * 3);
    vision::ResizeBilinear(view_, rh_, rw_, top_, left_, h_, w_, out);
    view_ = {out, h_, w_, w_ * 3};
    resized_ = false;
    top_ = left_ = 0;
  }

  // Scratch that does not hold the current view.
  uint8_t* Buffer(int64_t bytes) {
    thread_local std::array<std::vector<uint8_t>, 2> bufs;
    const bool in_first = view_.data >= bufs[0].data() && view_.data < bufs[0].data() + bufs[0].size();
    std::vector<uint8_t>& b = bufs[in_first ? 1 : 0];
    b.resize(static_cast<size_t>(bytes));
    return b.data();
  }

  vision::RgbView view_;
  bool resized_ = false, flip_ = false;
  int64_t rh_ = 0, rw_ = 0;
  int64_t top_ = 0, left_ = 0, h_, w_;
};

// Float planes of a large image bypass the CPU's caches (non-temporal
// stores, four floats at a time): they go to a batch slot that this core
// does not read again, and a regular store would first read each line in.
constexpr int64_t kStreamBytes = 256 << 10;

// One row into the float planes o[0..2], with the values WritePlanes's
// loops give.  Plain stores up to a 16-byte boundary (the same for the
// three planes: the caller checks that a plane is a multiple of 16 bytes),
// then four at a time.
void StreamFloatRow(const uint8_t* row, int64_t width, bool flip, const float* lut, float* const o[3]) {
  auto at = [&](int c, int64_t x) { return lut[c * 256 + row[3 * (flip ? width - 1 - x : x) + c]]; };
  int64_t x = 0;
  for (; x < width && (reinterpret_cast<uintptr_t>(o[0] + x) & 15) != 0; ++x)
    for (int c = 0; c < 3; ++c) o[c][x] = at(c, x);
  for (; x + 4 <= width; x += 4)
    for (int c = 0; c < 3; ++c) _mm_stream_ps(o[c] + x, _mm_setr_ps(at(c, x), at(c, x + 1), at(c, x + 2), at(c, x + 3)));
  for (; x < width; ++x)
    for (int c = 0; c < 3; ++c) o[c][x] = at(c, x);
}

// The view written CHW as elements of T, each byte of channel c through
// lut[c * 256 + byte]; `stream` (float only): with non-temporal stores.
template <class T>
void WritePlanes(const vision::RgbView& v, bool flip, const uint8_t* table, uint8_t* dst, bool stream = false) {
  const T* lut = reinterpret_cast<const T*>(table);
  T* out = reinterpret_cast<T*>(dst);
  const int64_t plane = v.height * v.width;
  for (int64_t y = 0; y < v.height; ++y) {
    const uint8_t* row = v.data + y * v.stride;
    T* const o[3] = {out + y * v.width, out + y * v.width + plane, out + y * v.width + 2 * plane};
    if constexpr (std::is_same_v<T, float>) {
      if (stream) {
        StreamFloatRow(row, v.width, flip, lut, o);
        continue;
      }
    }
    if (!flip) {
      for (int64_t x = 0; x < v.width; ++x) {
        o[0][x] = lut[row[3 * x]];
        o[1][x] = lut[256 + row[3 * x + 1]];
        o[2][x] = lut[512 + row[3 * x + 2]];
      }
    } else {
      for (int64_t x = 0, s = v.width - 1; x < v.width; ++x, --s) {
        o[0][x] = lut[row[3 * s]];
        o[1][x] = lut[256 + row[3 * s + 1]];
        o[2][x] = lut[512 + row[3 * s + 2]];
      }
    }
  }
  if (stream) _mm_sfence();  // the streamed stores are visible before the slot is handed on
}

bool IsCrop(Kind k) { return k == Kind::kCenterCrop || k == Kind::kRandomCrop || k == Kind::kRandomResizedCrop; }

}  // namespace

std::string ImageOp::Describe() const {
  const std::string size = "size=(" + std::to_string(height) + ", " + std::to_string(width) + ")";
  switch (kind) {
    case Kind::kResize:
      return width == 0 ? "Resize(size=" + std::to_string(height) +
                              (max_size ? ", max_size=" + std::to_string(max_size) : "") + ")"
                        : "Resize(" + size + ")";
    case Kind::kCenterCrop: return "CenterCrop(" + size + ")";
    case Kind::kRandomCrop: return "RandomCrop(" + size + (pad_if_needed ? ", pad_if_needed=True" : "") + ")";
    case Kind::kRandomResizedCrop:
      return "RandomResizedCrop(" + size + ", scale=(" + Num(scale_lo) + ", " + Num(scale_hi) + "), ratio=(" +
             Num(ratio_lo) + ", " + Num(ratio_hi) + "))";
    case Kind::kHorizontalFlip: return "RandomHorizontalFlip(p=" + Num(p) + ")";
    case Kind::kToDtype: return std::string("ToDtype(") + DTypeNameOf(dtype) + (scale ? ", scale=True" : "") + ")";
    case Kind::kNormalize: return "Normalize(mean=" + List(mean) + ", std=" + List(stddev) + ")";
  }
  return "?";
}

Result<std::shared_ptr<const ImagePipeline>> ImagePipeline::Make(std::vector<ImageOp> ops) {
  auto p = std::make_shared<ImagePipeline>();
  bool conversions = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ImageOp& op = ops[i];
    const std::string at = op.Describe() + " (step " + std::to_string(i) + "): ";
    const bool sized = op.kind == Kind::kResize || op.kind == Kind::kCenterCrop || op.kind == Kind::kRandomCrop ||
                       op.kind == Kind::kRandomResizedCrop;
    if (sized) {
      const bool shorter = op.kind == Kind::kResize && op.width == 0;
      if (op.height <= 0 || (!shorter && op.width <= 0) || op.height > (1 << 20) || op.width > (1 << 20))
        return Status::InvalidArgument(at + "sizes must be between 1 and 1048576");
      if (shorter && op.max_size != 0 && op.max_size <= op.height)
        return Status::InvalidArgument(at + "max_size must be larger than size");
    }
    if (Geometric(op.kind) && conversions)
      return Status::InvalidArgument(at + "stoker.vision runs the geometric steps on 8-bit pixels: put ToDtype "
                                          "and Normalize after every resize, crop and flip");
    switch (op.kind) {
      case Kind::kRandomResizedCrop:
        if (!(op.scale_lo > 0 && op.scale_lo <= op.scale_hi && op.scale_hi <= 1e6))
          return Status::InvalidArgument(at + "scale must be (min, max) with 0 < min <= max");
        if (!(op.ratio_lo > 0 && op.ratio_lo <= op.ratio_hi && std::isfinite(op.ratio_hi)))
          return Status::InvalidArgument(at + "ratio must be (min, max) with 0 < min <= max");
        break;
      case Kind::kHorizontalFlip:
        if (!(op.p >= 0 && op.p <= 1)) return Status::InvalidArgument(at + "p must be in [0, 1]");
        break;
      case Kind::kToDtype:
        if (op.dtype != ElementType::kUInt8 && !IsFloat(op.dtype))
          return Status::InvalidArgument(at + "the dtype must be uint8, float16, bfloat16, float32 or float64");
        if (op.dtype == ElementType::kUInt8 && p->dtype_ != ElementType::kUInt8)
          return Status::InvalidArgument(at + "back to uint8 after a float conversion is not supported");
        if (IsFloat(p->dtype_) && op.scale)
          return Status::InvalidArgument(at + "the image is already float; scale applies to uint8 input");
        p->scale_ = p->scale_ || (op.scale && IsFloat(op.dtype));
        p->dtype_ = op.dtype;
        conversions = true;
        break;
      case Kind::kNormalize: {
        if (!IsFloat(p->dtype_))
          return Status::InvalidArgument(at + "Normalize needs a float image (as torchvision's does): put "
                                              "ToDtype(\"float32\", scale=True) before it");
        std::vector<double> m = op.mean, s = op.stddev;
        if (m.size() == 1) m.assign(3, m[0]);
        if (s.size() == 1) s.assign(3, s[0]);
        if (m.size() != 3 || s.size() != 3)
          return Status::InvalidArgument(at + "mean and std need 1 or 3 values (RGB)");
        for (double v : s)
          if (!(v != 0 && std::isfinite(v))) return Status::InvalidArgument(at + "std must be finite and non-zero");
        if (p->mean_.empty()) {
          p->mean_ = m;
          p->stddev_ = s;
        } else {  // two in a row: ((x - m1) / s1 - m2) / s2
          for (int c = 0; c < 3; ++c) {
            p->mean_[c] = p->mean_[c] + m[c] * p->stddev_[c];
            p->stddev_[c] = p->stddev_[c] * s[c];
          }
        }
        conversions = true;
        break;
      }
      default:
        break;
    }
    if (Geometric(op.kind)) p->geometric_ = i + 1;
  }
  p->ops_ = std::move(ops);
  // A fixed output size: the last step that sets both sides does.
  for (size_t i = p->geometric_; i-- > 0;) {
    const ImageOp& op = p->ops_[i];
    if (op.kind == Kind::kHorizontalFlip) continue;
    if (op.kind == Kind::kResize && op.width == 0) break;
    p->fixed_h_ = op.height;
    p->fixed_w_ = op.width;
    break;
  }
  p->BuildTable();
  return std::shared_ptr<const ImagePipeline>(std::move(p));
}

void ImagePipeline::BuildTable() {
  // torchvision's arithmetic in float32 (scale: x / 255, then (x - mean) /
  // std); in float64 for float64.
  auto value = [&](int c, int v) {
    float x = static_cast<float>(v);
    if (scale_) x = x / 255.0f;
    if (!mean_.empty()) x = (x - static_cast<float>(mean_[c])) / static_cast<float>(stddev_[c]);
    return x;
  };
  table_.resize(3 * 256 * ElementSize(dtype_));
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) {
      const size_t i = static_cast<size_t>(c * 256 + v);
      switch (dtype_) {
        case ElementType::kUInt8:
          table_[i] = static_cast<uint8_t>(v);
          break;
        case ElementType::kFloat32:
          reinterpret_cast<float*>(table_.data())[i] = value(c, v);
          break;
        case ElementType::kFloat64: {
          double x = v;
          if (scale_) x = x / 255.0;
          if (!mean_.empty()) x = (x - mean_[c]) / stddev_[c];
          reinterpret_cast<double*>(table_.data())[i] = x;
          break;
        }
        default:  // float16, bfloat16
          reinterpret_cast<uint16_t*>(table_.data())[i] =
              dtype_ == ElementType::kFloat16 ? FloatToHalf(value(c, v)) : FloatToBFloat16(value(c, v));
      }
    }
}

void ImagePipeline::OutputSize(int64_t h, int64_t w, int64_t* oh, int64_t* ow) const {
  for (size_t i = 0; i < geometric_; ++i) {
    const ImageOp& op = ops_[i];
    if (op.kind == Kind::kHorizontalFlip) continue;
    if (op.kind == Kind::kResize && op.width == 0) {
      ShorterSide(h, w, op.height, op.max_size, &h, &w);
    } else {
      h = op.height;
      w = op.width;
    }
  }
  *oh = h;
  *ow = w;
}

bool ImagePipeline::InsideCrop(size_t step, int64_t ih, int64_t iw, uint64_t random, ImageBox* b) const {
  const ImageOp& op = ops_[step];
  switch (op.kind) {
    case Kind::kRandomResizedCrop: {
      Draws d(random, step);
      ResizedCropBox(op, ih, iw, &d, &b->top, &b->left, &b->height, &b->width);
      return true;
    }
    case Kind::kRandomCrop: {
      if (op.height > ih || op.width > iw) return false;
      Draws d(random, step);
      b->top = d.Below(ih - op.height + 1);
      b->left = d.Below(iw - op.width + 1);
      break;
    }
    case Kind::kCenterCrop:
      if (op.height > ih || op.width > iw) return false;
      b->top = RoundHalfEven(static_cast<double>(ih - op.height) / 2.0);
      b->left = RoundHalfEven(static_cast<double>(iw - op.width) / 2.0);
      break;
    default:
      return false;
  }
  b->height = op.height;
  b->width = op.width;
  return true;
}

bool ImagePipeline::ReadsPart() const {
  return (geometric_ >= 1 && IsCrop(ops_[0].kind)) ||
         (geometric_ >= 2 && ops_[0].kind == Kind::kResize && IsCrop(ops_[1].kind));
}

bool ImagePipeline::SourceBox(int64_t h, int64_t w, uint64_t random, ImageBox* box) const {
  if (geometric_ >= 1 && InsideCrop(0, h, w, random, box)) return true;
  // Resize, then a crop: the source pixels the resize reads for the window.
  if (geometric_ >= 2 && ops_[0].kind == Kind::kResize) {
    int64_t nh = ops_[0].height, nw = ops_[0].width;
    if (nw == 0) ShorterSide(h, w, ops_[0].height, ops_[0].max_size, &nh, &nw);
    ImageBox win;
    if (!InsideCrop(1, nh, nw, random, &win)) return false;
    int64_t y0, y1, x0, x1;
    vision::SourceSpan(h, nh, win.top, win.height, &y0, &y1);
    vision::SourceSpan(w, nw, win.left, win.width, &x0, &x1);
    *box = {y0, x0, y1 - y0, x1 - x0};
    return true;
  }
  return false;
}

Status ImagePipeline::Run(const uint8_t* rgb, int64_t h, int64_t w, uint64_t random, uint8_t* dst,
                          const ImageBox* box) const {
  Plan plan = box ? Plan(rgb, h, w, *box) : Plan(rgb, h, w);
  for (size_t i = 0; i < geometric_; ++i) {
    const ImageOp& op = ops_[i];
    const int64_t ih = plan.height(), iw = plan.width();
    switch (op.kind) {
      case Kind::kResize: {
        int64_t nh = op.height, nw = op.width;
        if (op.width == 0) ShorterSide(ih, iw, op.height, op.max_size, &nh, &nw);
        plan.Resize(nh, nw);
        break;
      }
      case Kind::kCenterCrop:
      case Kind::kRandomCrop:
      case Kind::kRandomResizedCrop: {
        ImageBox b;
        if (InsideCrop(i, ih, iw, random, &b)) {
          plan.Crop(b.top, b.left, b.height, b.width);
          if (op.kind == Kind::kRandomResizedCrop) plan.Resize(op.height, op.width);
          break;
        }
        // Larger than the image: torchvision's zero padding, then the crop.
        int64_t ph = ih, pw = iw, pt = 0, pl = 0;
        if (op.kind == Kind::kCenterCrop) {
          pl = op.width > iw ? (op.width - iw) / 2 : 0;
          pt = op.height > ih ? (op.height - ih) / 2 : 0;
          pw = iw + pl + (op.width > iw ? (op.width - iw + 1) / 2 : 0);
          ph = ih + pt + (op.height > ih ? (op.height - ih + 1) / 2 : 0);
          plan.Crop(RoundHalfEven(static_cast<double>(ph - op.height) / 2.0) - pt,
                    RoundHalfEven(static_cast<double>(pw - op.width) / 2.0) - pl, op.height, op.width);
          break;
        }
        if (!op.pad_if_needed)
          return Status::InvalidArgument(op.Describe() + " is larger than the image (" + std::to_string(iw) + "x" +
                                         std::to_string(ih) + " at that step); pass pad_if_needed=True to pad it");
        if (iw < op.width) pl = op.width - iw, pw = iw + 2 * pl;  // both sides by the shortfall
        if (ih < op.height) pt = op.height - ih, ph = ih + 2 * pt;
        Draws d(random, i);
        const int64_t top = d.Below(ph - op.height + 1);
        const int64_t left = d.Below(pw - op.width + 1);
        plan.Crop(top - pt, left - pl, op.height, op.width);
        break;
      }
      case Kind::kHorizontalFlip: {
        Draws d(random, i);
        if (op.p >= 1.0 || (op.p > 0 && d.Uniform() < op.p)) plan.Flip();
        break;
      }
      default:
        break;
    }
  }
  const vision::RgbView out = plan.Final();
  switch (ElementSize(dtype_)) {
    case 1:
      WritePlanes<uint8_t>(out, plan.flipped(), table_.data(), dst);
      break;
    case 2:
      WritePlanes<uint16_t>(out, plan.flipped(), table_.data(), dst);
      break;
    case 4:
      WritePlanes<float>(out, plan.flipped(), table_.data(), dst,
                         dtype_ == ElementType::kFloat32 && out.height * out.width * 12 >= kStreamBytes &&
                             (out.height * out.width) % 4 == 0 && reinterpret_cast<uintptr_t>(dst) % 4 == 0);
      break;
    default:
      WritePlanes<double>(out, plan.flipped(), table_.data(), dst);
  }
  return Status::OK();
}

Status ImagePipeline::CropBox(size_t step, int64_t h, int64_t w, uint64_t random, int64_t box[4]) const {
  ImageBox b;
  if (step >= ops_.size() || ops_[step].kind != Kind::kRandomResizedCrop || !InsideCrop(step, h, w, random, &b))
    return Status::InvalidArgument("step " + std::to_string(step) + " is not a RandomResizedCrop");
  box[0] = b.top;
  box[1] = b.left;
  box[2] = b.height;
  box[3] = b.width;
  return Status::OK();
}

std::string ImagePipeline::Describe() const {
  std::string s = "Compose([";
  for (size_t i = 0; i < ops_.size(); ++i) s += (i ? ", " : "") + ops_[i].Describe();
  return s + "])";
}

}  // namespace stoker
