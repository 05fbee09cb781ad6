// PackedDataset: sequences of seq_len tokens packed from the documents of
// token datasets (text/pack_plan.h says which pieces), as one native
// dataset with a constant length: sample i is packed sequence i.  Its
// fields, each of seq_len elements but the last:
//   input_ids     int64: the pieces' tokens, then pad_id;
//   labels        int64: each token's next token in its document (the
//                 true next one where a piece ends inside its document),
//                 -100 after a document's last token and on padding;
//   position_ids  int64: 0, 1, ... from the start of each piece (a piece is
//                 a segment of variable-length attention), and of the padding;
//   document_ids  int64: the document each token is from (-1: padding);
//   cu_seqlens    int32, variable: the segments' boundaries in the sequence,
//                 0 ... seq_len (the padding a segment of its own).
// The sources are laid end to end: document g is document g - offset(s) of
// source s.  With append_eos, every document is followed by eos_id.
#ifndef STOKER_TEXT_PACKED_DATASET_H_
#define STOKER_TEXT_PACKED_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/native_dataset.h"
#include "text/pack_plan.h"
#include "text/token_dataset.h"

namespace stoker {

struct PackOptions {
  uint32_t seq_len = 2048;
  PackMode mode = PackMode::kConcat;
  uint32_t window = 1024;  // best_fit's open sequences
  int64_t eos_id = -1;     // >= 0: appended after every document
  int64_t pad_id = 0;
};

class PackedDataset : public NativeDataset {
 public:
  // docs: the documents (global indices) in packing order.
  static Result<std::shared_ptr<PackedDataset>> Make(std::vector<std::shared_ptr<TokenDataset>> sources,
                                                     const std::vector<uint64_t>& docs, PackOptions options);
  uint64_t size() const override { return plan_.sequences(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  std::string DescribeSample(uint64_t index) const override;
  SampleStructure structure() const override { return SampleStructure::kDict; }
  const PackPlan& plan() const { return plan_; }
  uint64_t documents() const { return offsets_.back(); }

 private:
  PackedDataset() = default;
  // The source of document `doc` (global) and its index there.
  std::pair<const TokenDataset*, uint64_t> Locate(uint64_t doc) const;
  uint32_t Length(uint64_t doc) const;  // with the appended eos
  // Tokens [offset, offset + n) of document `doc`, the appended eos included.
  Status Tokens(uint64_t doc, uint64_t offset, uint64_t n, int64_t* out) const;
  std::vector<std::shared_ptr<TokenDataset>> sources_;
  std::vector<uint64_t> offsets_;  // sources + 1
  PackOptions options_;
  PackPlan plan_;
  std::vector<FieldSpec> fields_;
};

}  // namespace stoker

#endif  // STOKER_TEXT_PACKED_DATASET_H_
