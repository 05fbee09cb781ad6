// stoker::NativeDataset: a dataset whose samples C++ code reads straight
// into the slot pool, with no Python in the hot path (stoker.io in Python).
//
// A sample is one or more fields, each a fixed-shape tensor.  Read() is
// called from several loader threads at once and must be thread-safe.
#ifndef STOKER_NATIVE_DATASET_H_
#define STOKER_NATIVE_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// Element types, as in the batch format (src/shm/batch_format.h: DType).
enum class ElementType : uint8_t {
  kBool = 0, kUInt8, kInt8, kInt16, kInt32, kInt64, kUInt16, kUInt32, kUInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128,
};

struct FieldSpec {
  std::string name;            // "" for a dataset whose batch is one tensor
  ElementType dtype = ElementType::kFloat32;
  std::vector<int64_t> shape;  // of one sample
  uint64_t bytes() const;      // of one sample
};

class NativeDataset {
 public:
  virtual ~NativeDataset() = default;
  virtual uint64_t size() const = 0;
  virtual const std::vector<FieldSpec>& fields() const = 0;
  // Writes sample `index`: field f to dst[f] (fields()[f].bytes() bytes).
  // Errors name the file, the record and the offset.  Thread-safe.
  virtual Status Read(uint64_t index, uint8_t* const* dst) = 0;
  // A short description for messages ("raw file /data/x.bin").
  virtual std::string Describe() const = 0;
};

// Size in bytes of one element; 0 for an unknown code.
uint32_t ElementSize(ElementType t);
// "float32", "int64", ... (numpy names).
const char* DTypeNameOf(ElementType t);
// Parses "float32", "int64", ... (numpy names).
Result<ElementType> ParseElementType(const std::string& name);

}  // namespace stoker

#endif  // STOKER_NATIVE_DATASET_H_
