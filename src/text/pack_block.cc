// BlockPacker (pack_block.h).
#include "text/pack_block.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace stoker {

Result<BlockPacker> BlockPacker::Make(const int64_t* tokens, const uint64_t* starts, const int64_t* ids,
                                      uint64_t documents, uint32_t seq_len, PackMode mode, uint32_t window) {
  if (seq_len == 0) return Status::InvalidArgument("Pack: seq_len should be >= 1");
  if (window == 0) return Status::InvalidArgument("Pack: window should be >= 1");
  if (documents && starts[0] != 0) return Status::InvalidArgument("Pack: a block's first document starts at 0");
  for (uint64_t d = 0; d < documents; ++d) {
    if (starts[d + 1] < starts[d])
      return Status::InvalidArgument("Pack: document " + std::to_string(d) + " of the block ends before it starts");
    if (starts[d + 1] - starts[d] > UINT32_MAX)
      return Status::InvalidArgument("Pack: document " + std::to_string(ids[d]) + " has over 2^32 tokens");
  }
  BlockPacker b;
  b.tokens_ = tokens;
  b.starts_ = starts;
  b.ids_ = ids;
  b.seq_len_ = seq_len;
  std::vector<uint64_t> order(documents);
  for (uint64_t d = 0; d < documents; ++d) order[d] = d;
  STOKER_ASSIGN_OR_RETURN(
      b.plan_, MakePackPlan(order, [starts](uint64_t d) { return static_cast<uint32_t>(starts[d + 1] - starts[d]); },
                            seq_len, mode, window));
  // A sequence's segments: its pieces, and its padding if any.
  for (uint64_t i = 0; i < b.plan_.sequences(); ++i) {
    uint64_t used = 0;
    for (uint64_t p = b.plan_.first[i]; p < b.plan_.first[i + 1]; ++p) used += b.plan_.pieces[p].length;
    b.cu_entries_ += 1 + (b.plan_.first[i + 1] - b.plan_.first[i]) + (used < seq_len ? 1 : 0);
  }
  return b;
}

Status BlockPacker::Fill(int64_t pad_id, int64_t* input_ids, int64_t* labels, int64_t* position_ids,
                         int64_t* document_ids, int32_t* cu_seqlens, int64_t* cu_first) const {
  const PackSource source{
      [this](uint64_t d) { return static_cast<uint32_t>(starts_[d + 1] - starts_[d]); },
      [this](uint64_t d, uint64_t offset, uint64_t n, int64_t* out) {
        std::memcpy(out, tokens_ + starts_[d] + offset, n * sizeof(int64_t));
        return Status::OK();
      },
      [this](uint64_t d) { return ids_[d]; }};
  std::vector<int32_t> cu;
  uint64_t at = 0;
  cu_first[0] = 0;
  for (uint64_t i = 0; i < sequences(); ++i) {
    const uint64_t row = i * seq_len_;
    STOKER_RETURN_IF_ERROR(FillPackedSequence(plan_, i, seq_len_, pad_id, source, input_ids + row, labels + row,
                                              position_ids + row, document_ids + row, &cu));
    std::copy(cu.begin(), cu.end(), cu_seqlens + at);
    at += cu.size();
    cu_first[i + 1] = static_cast<int64_t>(at);
  }
  return Status::OK();
}

}  // namespace stoker
