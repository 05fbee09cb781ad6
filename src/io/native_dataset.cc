#include "stoker/native_dataset.h"

#include <algorithm>

#include "shm/batch_format.h"

namespace stoker {

static_assert(static_cast<int>(ElementType::kComplex128) == static_cast<int>(DType::kComplex128),
              "ElementType mirrors the batch format's DType");

uint32_t ElementSize(ElementType t) {
  return static_cast<uint8_t>(t) < static_cast<uint8_t>(DType::kNumDTypes) ? DTypeSize(static_cast<DType>(t)) : 0;
}

Status NativeDataset::ReadBatch(const uint64_t* indices, uint64_t n, uint8_t* const* dsts) {
  const size_t nf = fields().size();
  for (uint64_t k = 0; k < n; ++k) STOKER_RETURN_IF_ERROR(Read(indices[k], dsts + k * nf));
  return Status::OK();
}

Status NativeDataset::SampleBytes(uint64_t, uint64_t* bytes) {
  const std::vector<FieldSpec>& f = fields();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].variable) return Status::Internal(Describe() + " has a variable field but no SampleBytes");
    bytes[i] = f[i].bytes();
  }
  return Status::OK();
}

std::vector<int64_t> NativeDataset::Order(const OrderRecipe& o) {
  return o.RankPart(o.Global(size()), RankSplit::kStrided);
}

bool NativeDataset::has_variable_fields() const {
  for (const FieldSpec& f : fields())
    if (f.variable) return true;
  return false;
}

void NativeDataset::CountSkipped(const Status& why) {
  skipped_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(skip_mu_);
  last_skipped_ = why.message();
}

std::string NativeDataset::last_skipped() const {
  std::lock_guard<std::mutex> g(skip_mu_);
  return last_skipped_;
}

Status ValidateFieldSpec(const FieldSpec& f, const std::string& what) {
  uint64_t n = ElementSize(f.dtype);
  if (n == 0) return Status::InvalidArgument(what + ": unknown dtype");
  for (int64_t d : f.shape) {
    if (d <= 0) return Status::InvalidArgument(what + ": every dimension of the shape must be > 0");
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return Status::InvalidArgument(what + ": the shape is too large (more than 2^64 bytes per sample)");
  }
  return Status::OK();
}

uint64_t NumElements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string t = "(";
  for (size_t i = 0; i < shape.size(); ++i) t += (i ? ", " : "") + std::to_string(shape[i]);
  return t + (shape.size() == 1 ? ",)" : ")");
}

uint64_t FieldSpec::bytes() const {
  uint64_t n = ElementSize(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const char* DTypeNameOf(ElementType t) {
  return static_cast<uint8_t>(t) < static_cast<uint8_t>(DType::kNumDTypes) ? DTypeName(static_cast<DType>(t)) : "?";
}

Result<ElementType> ParseElementType(const std::string& name) {
  for (int i = 0; i < static_cast<int>(DType::kNumDTypes); ++i)
    if (name == DTypeName(static_cast<DType>(i))) return static_cast<ElementType>(i);
  return Status::InvalidArgument("unknown dtype '" + name +
                                 "' (one of bool, uint8, int8, int16, int32, int64, uint16, uint32, uint64, "
                                 "float16, bfloat16, float32, float64, complex64, complex128)");
}

}  // namespace stoker
