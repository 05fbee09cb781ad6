// BlockPacker (pack_block.h).
#include "text/pack_block.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace stoker {

Result<BlockPacker> BlockPacker::Make(const int64_t* tokens, const uint64_t* starts, const int64_t* ids,
                                      uint64_t documents, const BlockPackOptions& options) {
  const uint32_t seq_len = options.seq_len;
  if (seq_len == 0) return Status::InvalidArgument("Pack: seq_len should be >= 1");
  if (options.window == 0) return Status::InvalidArgument("Pack: window should be >= 1");
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
  const auto length = [starts](uint64_t d) { return static_cast<uint32_t>(starts[d + 1] - starts[d]); };
  std::vector<uint64_t> order(documents);
  for (uint64_t d = 0; d < documents; ++d) order[d] = d;
  if (options.longest_first)
    std::stable_sort(order.begin(), order.end(), [&](uint64_t x, uint64_t y) { return length(x) > length(y); });
  STOKER_ASSIGN_OR_RETURN(b.plan_, MakePackPlan(order, length, seq_len, options.mode, options.window));
  const uint64_t n = b.plan_.sequences();
  b.row_.resize(n);
  for (uint64_t i = 0; i < n; ++i) b.row_[i] = i;
  if (options.shuffle_key != 0) {  // Fisher-Yates over SplitMix64 (the same order on every platform)
    uint64_t x = options.shuffle_key;
    for (uint64_t i = n; i > 1; --i) {
      x += 0x9E3779B97F4A7C15ULL;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      z ^= z >> 31;
      std::swap(b.row_[i - 1], b.row_[static_cast<uint64_t>((static_cast<unsigned __int128>(z) * i) >> 64)]);
    }
  }
  // A sequence's cu_seqlens: 0 and the end of each segment.
  std::vector<uint64_t> entries(n);
  for (uint64_t i = 0; i < n; ++i) entries[b.row_[i]] = 1 + b.plan_.Segments(i, seq_len);
  b.cu_at_.assign(n + 1, 0);
  for (uint64_t r = 0; r < n; ++r) b.cu_at_[r + 1] = b.cu_at_[r] + entries[r];
  b.cu_entries_ = b.cu_at_[n];
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
  for (uint64_t i = 0; i < sequences(); ++i) {
    const uint64_t r = row_[i], at = r * seq_len_;
    STOKER_RETURN_IF_ERROR(FillPackedSequence(plan_, i, seq_len_, pad_id, source, input_ids + at, labels + at,
                                              position_ids + at, document_ids + at, &cu));
    std::copy(cu.begin(), cu.end(), cu_seqlens + cu_at_[r]);
  }
  for (uint64_t r = 0; r <= sequences(); ++r) cu_first[r] = static_cast<int64_t>(cu_at_[r]);
  return Status::OK();
}

}  // namespace stoker
