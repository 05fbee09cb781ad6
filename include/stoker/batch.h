// stoker::Batch: one batch from a stoker::Loader.  Each field is a typed,
// shaped view of the slot's shared memory (no copy); the slot goes back to
// the pool when the last copy of the Batch (and of anything taken from it)
// is gone.  Copying a Batch is cheap (shared ownership).
#ifndef STOKER_BATCH_H_
#define STOKER_BATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/native_dataset.h"

namespace stoker {

// A tensor in slot memory.  Valid while its Batch (or a copy) lives.
struct TensorView {
  ElementType dtype = ElementType::kUInt8;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t nbytes = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // The data as T; nullptr when T's size is not the element size.
  template <typename T>
  const T* as() const {
    return sizeof(T) == ElementSize(dtype) ? static_cast<const T*>(data) : nullptr;
  }
};

struct BatchField {
  std::string name;                 // "" for a dataset of one unnamed field
  bool variable = false;            // true: `items`, one tensor per sample
  TensorView tensor;                // fixed fields: [batch, *shape]; joined fields: their values
  std::vector<TensorView> items;    // variable fields (FieldLayout::kEach)
  // A variable field whose FieldSpec::layout joins its samples (variable
  // stays false): `tensor` is the values, end to end (kOffsets) or [batch,
  // L] padded (kPadded), and `index` int64 offsets [batch + 1] or lengths
  // [batch], in elements.
  FieldLayout layout = FieldLayout::kEach;
  TensorView index;
};

class Batch {
 public:
  Batch() = default;
  bool valid() const { return impl_ != nullptr; }
  uint64_t id() const;          // its number in the epoch (sampler order)
  uint64_t size() const;        // samples
  const std::vector<BatchField>& fields() const;
  // The field called `name`, or nullptr.
  const BatchField* field(std::string_view name) const;
  // Field i (0 for a dataset of one unnamed field).
  const TensorView& operator[](size_t i) const { return fields()[i].tensor; }
  // Bytes of tensor data in the batch.
  uint64_t nbytes() const;
  // Drops this reference now (the slot is freed with the last one).
  void reset() { impl_.reset(); }

  struct Impl;
  explicit Batch(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace stoker

#endif  // STOKER_BATCH_H_
