// The batch-format layout of n samples of a NativeDataset's fields: one
// tensor [n, *shape] (one unnamed field) or a dict of them, written by C++
// worker threads straight into a slot (src/shm/batch_format.h).
#ifndef STOKER_LOADER_NATIVE_BATCH_H_
#define STOKER_LOADER_NATIVE_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shm/batch_format.h"
#include "stoker/native_dataset.h"

namespace stoker {

class NativeBatchLayout {
 public:
  // batched=false: one sample without the batch dimension (batch_size=None).
  NativeBatchLayout(const std::vector<FieldSpec>& fields, uint64_t n, bool batched = true);
  uint64_t total_bytes() const { return total_; }
  // Writes the header and the tree; the caller fills the leaves.
  void WriteHeader(uint8_t* region) const;
  // Where sample i of field f goes.
  uint8_t* Sample(uint8_t* region, size_t f, uint64_t i) const {
    return region + offsets_[f] + i * sample_bytes_[f];
  }

 private:
  TreeWriter tree_;
  std::vector<uint64_t> offsets_, sample_bytes_;
  uint64_t total_ = 0;
};

}  // namespace stoker

#endif  // STOKER_LOADER_NATIVE_BATCH_H_
