// MixedDataset: native datasets laid end to end as one, for a mixture read
// by C++ threads (stoker.Mix of stoker.io datasets): global index g is
// sample g - offset(i) of source i.  The sources must have the same fields
// (names, types, shapes) and layout.  The mixed epoch's order of global
// indices is order/mix_order.h's (the loader's sampler makes it); Read only
// routes an index to its source.
#ifndef STOKER_IO_MIXED_DATASET_H_
#define STOKER_IO_MIXED_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "stoker/native_dataset.h"

namespace stoker {

class MixedDataset : public NativeDataset {
 public:
  static Result<std::shared_ptr<MixedDataset>> Make(std::vector<std::shared_ptr<NativeDataset>> sources);
  uint64_t size() const override { return offsets_.back(); }
  const std::vector<FieldSpec>& fields() const override { return sources_[0]->fields(); }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  // (each source's samples of the batch handed to its ReadBatch together)
  Status ReadBatch(const uint64_t* indices, uint64_t n, uint8_t* const* dsts) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  std::string DescribeSample(uint64_t index) const override;
  SampleStructure structure() const override { return sources_[0]->structure(); }
  void SetSeed(uint64_t seed) override;
  void SetEpoch(uint64_t epoch) override;

 private:
  explicit MixedDataset(std::vector<std::shared_ptr<NativeDataset>> sources);
  // (source, index within it) of global index `index` (< size()).
  std::pair<size_t, uint64_t> Locate(uint64_t index) const;
  std::vector<std::shared_ptr<NativeDataset>> sources_;
  std::vector<uint64_t> offsets_;  // sources + 1
  // The source holding global index (g >> shift_) << shift_, for each
  // bucket: Locate scans on from there (a few sources at most), in place
  // of a binary search over every source.
  std::vector<uint32_t> bucket_;
  int shift_ = 0;
};

}  // namespace stoker

#endif  // STOKER_IO_MIXED_DATASET_H_
