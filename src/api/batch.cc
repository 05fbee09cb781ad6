#include "api/batch_impl.h"

#include <algorithm>
#include <cstring>

#include "shm/batch_format.h"

namespace stoker {

namespace {

Status Bad(const std::string& what) { return Status::Internal("malformed native batch: " + what); }

Status ReadTensor(TreeReader& r, const uint8_t* data, uint64_t used, TensorView* t) {
  uint8_t dtype, ndim;
  if (!r.Get(&dtype) || !r.Get(&ndim) || ndim > kMaxDims) return Bad("tensor header");
  if (dtype >= static_cast<uint8_t>(DType::kNumDTypes)) return Bad("dtype");
  t->dtype = static_cast<ElementType>(dtype);
  t->shape.resize(ndim);
  for (auto& d : t->shape)
    if (!r.Get(&d) || d < 0) return Bad("shape");
  uint64_t off, n;
  if (!r.Get(&off) || !r.Get(&n)) return Bad("tensor location");
  if (off > used || n > used - off) return Bad("tensor past the end of the batch");
  t->data = data + off;
  t->nbytes = n;
  return Status::OK();
}

Status ReadField(TreeReader& r, const uint8_t* data, uint64_t used, BatchField* f) {
  uint8_t tag;
  if (!r.Get(&tag)) return Bad("field tag");
  if (tag == static_cast<uint8_t>(Tag::kTensor)) return ReadTensor(r, data, used, &f->tensor);
  if (tag == static_cast<uint8_t>(Tag::kDict)) {  // a joined field: {"values": ..., "offsets" or "lengths": ...}
    uint32_t n, len;
    const uint8_t* key;
    if (!r.Get(&n) || n != 2) return Bad("joined field");
    for (uint32_t i = 0; i < n; ++i) {
      if (!r.Get(&tag) || tag != static_cast<uint8_t>(Tag::kStr) || !r.Get(&len) || !r.GetBytes(len, &key))
        return Bad("joined field key");
      const std::string_view k(reinterpret_cast<const char*>(key), len);
      if (!r.Get(&tag) || tag != static_cast<uint8_t>(Tag::kTensor)) return Bad("joined field part");
      if (k == "values") {
        STOKER_RETURN_IF_ERROR(ReadTensor(r, data, used, &f->tensor));
      } else if (k == "offsets" || k == "lengths") {
        f->layout = k == "offsets" ? FieldLayout::kOffsets : FieldLayout::kPadded;
        STOKER_RETURN_IF_ERROR(ReadTensor(r, data, used, &f->index));
      } else {
        return Bad("joined field key");
      }
    }
    return f->layout == FieldLayout::kEach ? Bad("joined field") : Status::OK();
  }
  if (tag != static_cast<uint8_t>(Tag::kList)) return Bad("field kind");
  uint32_t n;
  if (!r.Get(&n)) return Bad("list length");
  f->variable = true;
  f->items.resize(n);
  for (TensorView& t : f->items) {
    if (!r.Get(&tag)) return Bad("list item");
    if (tag == static_cast<uint8_t>(Tag::kStrAt) || tag == static_cast<uint8_t>(Tag::kBytesAt)) {
      uint64_t off, n;  // a str or bytes sample: its bytes, a uint8 view
      if (!r.Get(&off) || !r.Get(&n) || off > used || n > used - off) return Bad("string location");
      t.dtype = ElementType::kUInt8;
      t.shape = {static_cast<int64_t>(n)};
      t.data = data + off;
      t.nbytes = n;
      continue;
    }
    if (tag != static_cast<uint8_t>(Tag::kTensor)) return Bad("list item");
    STOKER_RETURN_IF_ERROR(ReadTensor(r, data, used, &t));
  }
  return Status::OK();
}

}  // namespace

Status ParseNativeBatch(const uint8_t* data, uint64_t used, Batch::Impl* impl, const std::vector<FieldSpec>* fields) {
  BatchHeader h;
  if (used < sizeof h) return Bad("short");
  std::memcpy(&h, data, sizeof h);
  if (h.magic != kBatchMagic || h.tree_offset > used || h.tree_bytes > used - h.tree_offset)
    return Bad("header");
  TreeReader r(data + h.tree_offset, h.tree_bytes);
  uint8_t tag;
  if (!r.Get(&tag)) return Bad("root");
  if (tag == static_cast<uint8_t>(Tag::kDict)) {
    uint32_t n;
    if (!r.Get(&n)) return Bad("dict");
    impl->fields.resize(n);
    for (BatchField& f : impl->fields) {
      uint32_t len;
      const uint8_t* key;
      if (!r.Get(&tag) || tag != static_cast<uint8_t>(Tag::kStr) || !r.Get(&len) || !r.GetBytes(len, &key))
        return Bad("key");
      f.name.assign(reinterpret_cast<const char*>(key), len);
      STOKER_RETURN_IF_ERROR(ReadField(r, data, used, &f));
    }
  } else if (tag == static_cast<uint8_t>(Tag::kTensor)) {
    impl->fields.resize(1);
    STOKER_RETURN_IF_ERROR(ReadTensor(r, data, used, &impl->fields[0].tensor));
  } else if (fields && (tag == static_cast<uint8_t>(Tag::kList) || tag == static_cast<uint8_t>(Tag::kTuple))) {
    uint32_t n;  // a dataset of tuples: its fields in order
    if (!r.Get(&n) || n != fields->size()) return Bad("tuple");
    impl->fields.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      impl->fields[i].name = (*fields)[i].name;
      STOKER_RETURN_IF_ERROR(ReadField(r, data, used, &impl->fields[i]));
    }
  } else {
    return Bad("root kind");
  }
  for (const BatchField& f : impl->fields) {
    if (f.variable) {
      impl->size = f.items.size();
      for (const TensorView& t : f.items) impl->nbytes += t.nbytes;
    } else if (f.layout != FieldLayout::kEach) {
      const int64_t n = f.index.shape.empty() ? 0 : f.index.shape[0];
      impl->size = static_cast<uint64_t>(f.layout == FieldLayout::kOffsets ? std::max<int64_t>(n - 1, 0) : n);
      impl->nbytes += f.tensor.nbytes;
    } else {
      impl->size = f.tensor.shape.empty() ? 1 : static_cast<uint64_t>(f.tensor.shape[0]);
      impl->nbytes += f.tensor.nbytes;
    }
  }
  return Status::OK();
}

uint64_t Batch::id() const { return impl_ ? impl_->id : 0; }
uint64_t Batch::size() const { return impl_ ? impl_->size : 0; }
uint64_t Batch::nbytes() const { return impl_ ? impl_->nbytes : 0; }

const std::vector<BatchField>& Batch::fields() const {
  static const std::vector<BatchField> kNone;
  return impl_ ? impl_->fields : kNone;
}

const BatchField* Batch::field(std::string_view name) const {
  for (const BatchField& f : fields())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace stoker
