// NativeCollate: collation for C++ readers.  The batch-format layout of n
// samples of a NativeDataset's fields, written by C++ worker threads straight into a slot (src/shm/batch_format.h):
//   - a fixed field is one tensor [n, *shape] (without the n for an unbatched
//     sample, batch_size=None);
//   - a variable field is a list of n 1-D tensors, each its own length (a
//     str or bytes field's: a list of str or bytes made from the leaves),
//     or by its FieldLayout values + offsets, or padded values + lengths
//     (a dict of the two tensors; include/stoker/native_dataset.h);
//   - one unnamed field is the batch itself, else a dict by field name, or
//     for a dataset of tuples a list of the fields (a tuple unbatched).
// The header is written last (WriteHeader), when it is known which samples
// were kept: a sample skipped as bad is left out and the rest close ranks.
#ifndef STOKER_COLLATE_NATIVE_COLLATE_H_
#define STOKER_COLLATE_NATIVE_COLLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shm/batch_format.h"
#include "stoker/native_dataset.h"

namespace stoker {

class NativeCollate {
 public:
  // batched=false: one sample without the batch dimension (batch_size=None).
  // sample_bytes (n x fields, row per sample) is needed when a field is
  // variable; fixed fields' entries are ignored.
  NativeCollate(const std::vector<FieldSpec>& fields, uint64_t n, bool batched = true,
                    const std::vector<uint64_t>* sample_bytes = nullptr,
                    SampleStructure structure = SampleStructure::kDict);
  uint64_t total_bytes() const { return total_; }
  // Where sample i of field f goes.
  uint8_t* Sample(uint8_t* region, size_t f, uint64_t i) const {
    return region + (fields_[f].variable ? var_offsets_[f][i] : offsets_[f] + i * fields_[f].bytes());
  }
  // Writes the header and the tree for the samples `kept` (positions in
  // 0..n-1, ascending; nullptr: all), moving kept fixed-field samples down.
  void WriteHeader(uint8_t* region, const std::vector<uint64_t>* kept = nullptr) const;

 private:
  void BuildTree(TreeWriter* tree, const std::vector<uint64_t>* kept) const;
  // Whether field f is laid out as values + offsets or padded (batched).
  bool Joined(size_t f) const {
    return batched_ && fields_[f].variable && fields_[f].layout != FieldLayout::kEach;
  }
  // A joined field's samples kept, moved to their places (end to end, or
  // a row each), and its offsets or lengths written.
  void Join(uint8_t* region, size_t f, const std::vector<uint64_t>* kept) const;
  std::vector<FieldSpec> fields_;
  uint64_t n_;
  bool batched_, dict_, tuple_;
  std::vector<uint64_t> offsets_;                   // fixed fields; joined fields' values
  std::vector<std::vector<uint64_t>> var_offsets_;  // variable fields, per sample
  std::vector<uint64_t> index_;                     // joined fields: their offsets or lengths
  std::vector<uint64_t> row_;                       // padded fields: bytes of a row
  std::vector<uint64_t> sample_bytes_;              // n x fields
  uint64_t total_ = 0;
};

}  // namespace stoker

#endif  // STOKER_COLLATE_NATIVE_COLLATE_H_
