#include "stoker/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/mix.h"
#include "io/half.h"

namespace stoker {

namespace {

struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };

template <class F>
bool Dispatch(ElementType t, F&& f) {
  switch (t) {
    case ElementType::kBool: f(bool{}); return true;
    case ElementType::kUInt8: f(uint8_t{}); return true;
    case ElementType::kInt8: f(int8_t{}); return true;
    case ElementType::kInt16: f(int16_t{}); return true;
    case ElementType::kInt32: f(int32_t{}); return true;
    case ElementType::kInt64: f(int64_t{}); return true;
    case ElementType::kUInt16: f(uint16_t{}); return true;
    case ElementType::kUInt32: f(uint32_t{}); return true;
    case ElementType::kUInt64: f(uint64_t{}); return true;
    case ElementType::kFloat16: f(Half{}); return true;
    case ElementType::kBFloat16: f(BF16{}); return true;
    case ElementType::kFloat32: f(float{}); return true;
    case ElementType::kFloat64: f(double{}); return true;
    default: return false;  // complex
  }
}

template <class T>
auto Widen(T v) {
  if constexpr (std::is_same_v<T, Half>) return HalfToFloat(v.bits);
  else if constexpr (std::is_same_v<T, BF16>) return BFloat16ToFloat(v.bits);
  else return v;
}

template <class Out, class In>
Out ConvertOne(In raw) {
  const auto v = Widen(raw);
  using V = decltype(v);
  if constexpr (std::is_same_v<Out, Half>) return Half{FloatToHalf(static_cast<float>(v))};
  else if constexpr (std::is_same_v<Out, BF16>) return BF16{FloatToBFloat16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<Out, bool>) return v != V{};
  else if constexpr (std::is_integral_v<Out> && std::is_floating_point_v<V>) {
    if (std::isnan(v)) return Out{0};
    if (v <= static_cast<V>(std::numeric_limits<Out>::min())) return std::numeric_limits<Out>::min();
    if (v >= static_cast<V>(std::numeric_limits<Out>::max())) return std::numeric_limits<Out>::max();
    return static_cast<Out>(v);
  } else {
    return static_cast<Out>(v);
  }
}

bool IsComplex(ElementType t) { return t == ElementType::kComplex64 || t == ElementType::kComplex128; }

class Cast : public Transform {
 public:
  explicit Cast(ElementType to) : to_(to) {}
  Result<FieldSpec> OutputSpec(const FieldSpec& in) const override {
    if (IsComplex(in.dtype) || IsComplex(to_))
      return Status::InvalidArgument("Cast: complex dtypes are not supported");
    FieldSpec out = in;
    out.dtype = to_;
    return out;
  }
  void Apply(const FieldSpec& in, const uint8_t* src, uint8_t* dst, uint64_t) const override {
    const uint64_t n = NumElements(in.shape);
    if (in.dtype == to_) {
      std::memcpy(dst, src, n * ElementSize(in.dtype));
      return;
    }
    Dispatch(in.dtype, [&](auto in_tag) {
      using In = decltype(in_tag);
      Dispatch(to_, [&](auto out_tag) {
        using Out = decltype(out_tag);
        for (uint64_t i = 0; i < n; ++i) {
          In v;
          std::memcpy(&v, src + i * sizeof(In), sizeof(In));
          const Out o = ConvertOne<Out>(v);
          std::memcpy(dst + i * sizeof(Out), &o, sizeof(Out));
        }
      });
    });
  }
  std::string Describe() const override { return std::string("Cast(") + DTypeNameOf(to_) + ")"; }

 private:
  ElementType to_;
};

class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> inv_std, int axis)
      : mean_(std::move(mean)), inv_std_(std::move(inv_std)), axis_(axis) {}
  Result<FieldSpec> OutputSpec(const FieldSpec& in) const override {
    if (IsComplex(in.dtype)) return Status::InvalidArgument("Normalize: complex dtypes are not supported");
    if (mean_.size() > 1) {
      const int nd = static_cast<int>(in.shape.size());
      const int a = axis_ < 0 ? axis_ + nd : axis_;
      if (a < 0 || a >= nd)
        return Status::InvalidArgument("Normalize: axis " + std::to_string(axis_) + " is out of range for shape " +
                                       ShapeString(in.shape));
      if (static_cast<size_t>(in.shape[a]) != mean_.size())
        return Status::InvalidArgument("Normalize: " + std::to_string(mean_.size()) + " means for axis " +
                                       std::to_string(axis_) + " of shape " + ShapeString(in.shape) + ", which has " +
                                       std::to_string(in.shape[a]));
    }
    FieldSpec out = in;
    out.dtype = in.dtype == ElementType::kFloat64 ? ElementType::kFloat64 : ElementType::kFloat32;
    return out;
  }
  void Apply(const FieldSpec& in, const uint8_t* src, uint8_t* dst, uint64_t) const override {
    const uint64_t n = NumElements(in.shape);
    uint64_t inner = n, channels = 1;
    if (mean_.size() > 1) {
      const int nd = static_cast<int>(in.shape.size());
      const int a = axis_ < 0 ? axis_ + nd : axis_;
      channels = static_cast<uint64_t>(in.shape[a]);
      inner = 1;
      for (int i = a + 1; i < nd; ++i) inner *= static_cast<uint64_t>(in.shape[i]);
    }
    Dispatch(in.dtype, [&](auto in_tag) {
      using In = decltype(in_tag);
      auto run = [&](auto out_tag) {
        using Out = decltype(out_tag);
        for (uint64_t i = 0; i < n; ++i) {
          const uint64_t c = channels == 1 ? 0 : (i / inner) % channels;
          In v;
          std::memcpy(&v, src + i * sizeof(In), sizeof(In));
          const Out o = static_cast<Out>((static_cast<double>(Widen(v)) - mean_[c]) * inv_std_[c]);
          std::memcpy(dst + i * sizeof(Out), &o, sizeof(Out));
        }
      };
      if (in.dtype == ElementType::kFloat64) run(double{});
      else run(float{});
    });
  }
  std::string Describe() const override { return "Normalize(" + std::to_string(mean_.size()) + " channels)"; }

 private:
  std::vector<double> mean_, inv_std_;
  int axis_;
};

// Copies the window [off, off+size) of the last k dims of `in` (element size es).
void CopyWindow(const std::vector<int64_t>& shape, uint32_t es, const std::vector<int64_t>& off,
                const std::vector<int64_t>& size, const uint8_t* src, uint8_t* dst) {
  const size_t nd = shape.size(), k = size.size();
  // Full dims: everything before the window dims.
  std::vector<int64_t> wshape(shape.begin(), shape.begin() + (nd - k));
  std::vector<int64_t> wo(nd - k, 0);
  wshape.insert(wshape.end(), size.begin(), size.end());
  wo.insert(wo.end(), off.begin(), off.end());
  // Strides of the source (in elements).
  std::vector<uint64_t> stride(nd, 1);
  for (size_t i = nd; i-- > 1;) stride[i - 1] = stride[i] * static_cast<uint64_t>(shape[i]);
  const uint64_t row = static_cast<uint64_t>(wshape[nd - 1]) * es;
  const uint64_t rows = NumElements(wshape) / static_cast<uint64_t>(wshape[nd - 1]);
  std::vector<int64_t> idx(nd, 0);  // over wshape[0..nd-2]
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t at = static_cast<uint64_t>(wo[nd - 1]);
    for (size_t i = 0; i + 1 < nd; ++i) at += static_cast<uint64_t>(idx[i] + wo[i]) * stride[i];
    std::memcpy(dst + r * row, src + at * es, row);
    for (size_t i = nd - 1; i-- > 0;) {
      if (++idx[i] < wshape[i]) break;
      idx[i] = 0;
    }
  }
}

class Crop : public Transform {
 public:
  Crop(std::vector<int64_t> off, std::vector<int64_t> size, bool random)
      : off_(std::move(off)), size_(std::move(size)), random_(random) {}
  Result<FieldSpec> OutputSpec(const FieldSpec& in) const override {
    const std::string name = random_ ? "RandomCrop" : "Crop";
    if (size_.size() > in.shape.size())
      return Status::InvalidArgument(name + ": a " + std::to_string(size_.size()) + "-d window for shape " +
                                     ShapeString(in.shape));
    const size_t base = in.shape.size() - size_.size();
    for (size_t i = 0; i < size_.size(); ++i) {
      const int64_t o = random_ ? 0 : off_[i];
      if (o + size_[i] > in.shape[base + i])
        return Status::InvalidArgument(name + ": window " + ShapeString(size_) +
                                       (random_ ? "" : " at " + ShapeString(off_)) + " does not fit shape " +
                                       ShapeString(in.shape));
    }
    FieldSpec out = in;
    for (size_t i = 0; i < size_.size(); ++i) out.shape[base + i] = size_[i];
    return out;
  }
  void Apply(const FieldSpec& in, const uint8_t* src, uint8_t* dst, uint64_t random) const override {
    std::vector<int64_t> off = off_;
    if (random_) {
      const size_t base = in.shape.size() - size_.size();
      off.resize(size_.size());
      for (size_t i = 0; i < size_.size(); ++i) {
        random = Mix64(random + i);
        const uint64_t span = static_cast<uint64_t>(in.shape[base + i] - size_[i]) + 1;
        off[i] = static_cast<int64_t>(random % span);
      }
    }
    CopyWindow(in.shape, ElementSize(in.dtype), off, size_, src, dst);
  }
  std::string Describe() const override { return (random_ ? "RandomCrop" : "Crop") + ShapeString(size_); }

 private:
  std::vector<int64_t> off_, size_;
  bool random_;
};

class Flip : public Transform {
 public:
  Flip(int axis, double p) : axis_(axis), p_(p) {}
  Result<FieldSpec> OutputSpec(const FieldSpec& in) const override {
    const int nd = static_cast<int>(in.shape.size());
    if (axis_ >= nd || axis_ < -nd)
      return Status::InvalidArgument("Flip: axis " + std::to_string(axis_) + " is out of range for shape " +
                                     ShapeString(in.shape));
    return in;
  }
  void Apply(const FieldSpec& in, const uint8_t* src, uint8_t* dst, uint64_t random) const override {
    const uint64_t total = in.bytes();
    const bool flip = p_ >= 1.0 || (p_ > 0.0 && static_cast<double>(Mix64(random) >> 11) * 0x1.0p-53 < p_);
    if (!flip) {
      std::memcpy(dst, src, total);
      return;
    }
    const int nd = static_cast<int>(in.shape.size());
    const int a = axis_ < 0 ? axis_ + nd : axis_;
    const uint64_t n = static_cast<uint64_t>(in.shape[a]);
    uint64_t inner = ElementSize(in.dtype);
    for (int i = a + 1; i < nd; ++i) inner *= static_cast<uint64_t>(in.shape[i]);
    const uint64_t outer = total / (n * inner);
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t k = 0; k < n; ++k)
        std::memcpy(dst + (o * n + k) * inner, src + (o * n + (n - 1 - k)) * inner, inner);
  }
  std::string Describe() const override { return "Flip(axis=" + std::to_string(axis_) + ")"; }

 private:
  int axis_;
  double p_;
};

class Reshape : public Transform {
 public:
  explicit Reshape(std::vector<int64_t> shape) : shape_(std::move(shape)) {}
  Result<FieldSpec> OutputSpec(const FieldSpec& in) const override {
    const uint64_t n = NumElements(in.shape);
    uint64_t known = 1;
    int infer = -1;
    for (size_t i = 0; i < shape_.size(); ++i) {
      if (shape_[i] == -1) infer = static_cast<int>(i);
      else known *= static_cast<uint64_t>(shape_[i]);
    }
    FieldSpec out = in;
    out.shape = shape_;
    if (infer >= 0) {
      if (known == 0 || n % known != 0)
        return Status::InvalidArgument("Reshape: cannot infer -1 in " + ShapeString(shape_) + " from shape " +
                                       ShapeString(in.shape));
      out.shape[infer] = static_cast<int64_t>(n / known);
    } else if (known != n) {
      return Status::InvalidArgument("Reshape: " + ShapeString(shape_) + " has " + std::to_string(known) +
                                     " elements, shape " + ShapeString(in.shape) + " has " + std::to_string(n));
    }
    return out;
  }
  void Apply(const FieldSpec& in, const uint8_t* src, uint8_t* dst, uint64_t) const override {
    if (src != dst) std::memcpy(dst, src, in.bytes());
  }
  bool IsView() const override { return true; }
  std::string Describe() const override { return "Reshape" + ShapeString(shape_); }

 private:
  std::vector<int64_t> shape_;
};

// The dataset: base fields read into per-thread scratch, chains applied,
// the last step writing into the slot.
class Transformed : public NativeDataset {
 public:
  struct Chain {
    TransformChain steps;
    std::vector<FieldSpec> specs;  // input of each step, then the output
  };
  Transformed(std::shared_ptr<NativeDataset> base, std::vector<Chain> chains, uint64_t seed)
      : base_(std::move(base)), chains_(std::move(chains)), seed_(seed) {
    for (size_t f = 0; f < chains_.size(); ++f)
      fields_.push_back(chains_[f].specs.empty() ? base_->fields()[f] : chains_[f].specs.back());
    set_on_error(base_->on_error());
  }
  uint64_t size() const override { return base_->size(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  std::string Describe() const override { return base_->Describe(); }
  std::string DescribeSample(uint64_t index) const override { return base_->DescribeSample(index); }
  SampleStructure structure() const override { return base_->structure(); }
  void SetSeed(uint64_t seed) override { base_->SetSeed(seed); }
  const std::shared_ptr<NativeDataset>& base() const { return base_; }
  const std::vector<Chain>& chains() const { return chains_; }
  void SetEpoch(uint64_t e) override {
    NativeDataset::SetEpoch(e);
    base_->SetEpoch(e);
  }
  Status BeginEpoch(uint64_t e) override {
    NativeDataset::SetEpoch(e);
    return base_->BeginEpoch(e);
  }
  std::vector<int64_t> Order(const OrderRecipe& o) override { return base_->Order(o); }
  void Interrupt() override { base_->Interrupt(); }
  std::string EpochState() const override { return base_->EpochState(); }
  Status RestoreEpoch(const std::string& state) override { return base_->RestoreEpoch(state); }
  Status Read(uint64_t index, uint8_t* const* dst) override {
    const size_t nf = fields_.size();
    thread_local std::vector<std::vector<uint8_t>> scratch;  // per field: input, and two ping-pong buffers
    thread_local std::vector<uint8_t*> base_dst;
    if (scratch.size() < 3 * nf) scratch.resize(3 * nf);
    base_dst.assign(nf, nullptr);
    for (size_t f = 0; f < nf; ++f) {
      if (chains_[f].steps.empty()) {
        base_dst[f] = dst[f];
        continue;
      }
      std::vector<uint8_t>& in = scratch[3 * f];
      if (in.size() < chains_[f].specs[0].bytes()) in.resize(chains_[f].specs[0].bytes());
      base_dst[f] = in.data();
    }
    Status st = base_->Read(index, base_dst.data());
    if (!st.ok()) return st;
    const uint64_t epoch = this->epoch();
    for (size_t f = 0; f < nf; ++f) {
      const Chain& c = chains_[f];
      if (c.steps.empty()) continue;
      const uint8_t* cur = base_dst[f];
      int pp = 0;
      for (size_t s = 0; s < c.steps.size(); ++s) {
        const bool last = s + 1 == c.steps.size();
        if (c.steps[s]->IsView() && !last) continue;  // same bytes, new spec
        uint8_t* out;
        if (last) {
          out = dst[f];
        } else {
          std::vector<uint8_t>& b = scratch[3 * f + 1 + pp];
          if (b.size() < c.specs[s + 1].bytes()) b.resize(c.specs[s + 1].bytes());
          out = b.data();
          pp ^= 1;
        }
        const uint64_t random = Mix64(seed_ ^ Mix64(epoch ^ Mix64(index ^ Mix64((f << 16) | s))));
        c.steps[s]->Apply(c.specs[s], cur, out, random);
        cur = out;
      }
    }
    return Status::OK();
  }

 private:
  std::shared_ptr<NativeDataset> base_;
  std::vector<Chain> chains_;
  std::vector<FieldSpec> fields_;
  uint64_t seed_;
};

}  // namespace

std::shared_ptr<Transform> MakeCast(ElementType to) { return std::make_shared<Cast>(to); }

Result<std::shared_ptr<Transform>> MakeNormalize(std::vector<double> mean, std::vector<double> stddev, int axis) {
  if (mean.empty() || mean.size() != stddev.size())
    return Status::InvalidArgument("Normalize: mean and std need the same number (>= 1) of values (got " +
                                   std::to_string(mean.size()) + " and " + std::to_string(stddev.size()) + ")");
  for (double& s : stddev) {
    if (!(s > 0)) return Status::InvalidArgument("Normalize: every std must be > 0");
    s = 1.0 / s;
  }
  return std::shared_ptr<Transform>(std::make_shared<Normalize>(std::move(mean), std::move(stddev), axis));
}

Result<std::shared_ptr<Transform>> MakeCrop(std::vector<int64_t> offset, std::vector<int64_t> size) {
  if (size.empty() || offset.size() != size.size())
    return Status::InvalidArgument("Crop: offset and size need the same number (>= 1) of dimensions");
  for (size_t i = 0; i < size.size(); ++i)
    if (size[i] <= 0 || offset[i] < 0) return Status::InvalidArgument("Crop: sizes must be > 0 and offsets >= 0");
  return std::shared_ptr<Transform>(std::make_shared<Crop>(std::move(offset), std::move(size), false));
}

Result<std::shared_ptr<Transform>> MakeRandomCrop(std::vector<int64_t> size) {
  if (size.empty()) return Status::InvalidArgument("RandomCrop: give the window's size");
  for (int64_t s : size)
    if (s <= 0) return Status::InvalidArgument("RandomCrop: sizes must be > 0");
  return std::shared_ptr<Transform>(std::make_shared<Crop>(std::vector<int64_t>{}, std::move(size), true));
}

Result<std::shared_ptr<Transform>> MakeFlip(int axis, double p) {
  if (!(p >= 0 && p <= 1)) return Status::InvalidArgument("Flip: p must be in [0, 1]");
  return std::shared_ptr<Transform>(std::make_shared<Flip>(axis, p));
}

Result<std::shared_ptr<Transform>> MakeReshape(std::vector<int64_t> shape) {
  int inferred = 0;
  for (int64_t d : shape) {
    if (d == -1) ++inferred;
    else if (d <= 0) return Status::InvalidArgument("Reshape: dimensions must be > 0 (or one -1)");
  }
  if (inferred > 1) return Status::InvalidArgument("Reshape: at most one -1");
  return std::shared_ptr<Transform>(std::make_shared<Reshape>(std::move(shape)));
}

Result<std::shared_ptr<NativeDataset>> TransformDataset(std::shared_ptr<NativeDataset> base,
                                                        std::vector<std::pair<std::string, TransformChain>> chains,
                                                        uint64_t seed) {
  std::vector<Transformed::Chain> per_field(base->fields().size());
  // Transforms of a transformed dataset extend its chains (one level only:
  // the per-thread scratch buffers are not reentrant).
  if (auto* t = dynamic_cast<Transformed*>(base.get())) {
    per_field = t->chains();
    base = t->base();
  }
  const std::vector<FieldSpec>& fields = base->fields();
  for (auto& [name, chain] : chains) {
    size_t f = 0;
    while (f < fields.size() && fields[f].name != name) ++f;
    if (f == fields.size()) {
      std::string have;
      for (const FieldSpec& x : fields) have += (have.empty() ? "'" : ", '") + x.name + "'";
      return Status::InvalidArgument("transforms for field '" + name + "', but " + base->Describe() +
                                     " has fields " + have);
    }
    if (fields[f].variable)
      return Status::InvalidArgument("field '" + name + "' of " + base->Describe() +
                                     " varies in length; native transforms need a fixed shape");
    Transformed::Chain& c = per_field[f];
    if (c.specs.empty()) c.specs.push_back(fields[f]);
    for (auto& t : chain) {
      Result<FieldSpec> out = t->OutputSpec(c.specs.back());
      if (!out.ok())
        return Status::InvalidArgument("field '" + name + "': " + out.status().message());
      c.steps.push_back(t);
      c.specs.push_back(std::move(out).value());
    }
  }
  return std::shared_ptr<NativeDataset>(std::make_shared<Transformed>(std::move(base), std::move(per_field), seed));
}

}  // namespace stoker
