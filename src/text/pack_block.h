// BlockPacker: a block of documents already tokenized, in memory, packed
// into sequences of seq_len tokens (text/pack_plan.h's plan and fields).
// The streaming packer of text tokenized on the fly (stoker.text.Pack over a
// TextDataset) packs each block of an epoch's documents with it, in the
// worker that tokenized the block, with no Python per sequence.
//
//   tokens: the block's documents end to end; starts: documents + 1
//   offsets into tokens (document d is [starts[d], starts[d + 1]));
//   ids: what document_ids says for each (the dataset's indices).
//
// A block is packed whole, so best_fit may take its documents longest
// first (best fit decreasing: far less padding than in their order), and
// the sequences may come out in a shuffled order (else the long documents'
// sequences would all come first).
#ifndef STOKER_TEXT_PACK_BLOCK_H_
#define STOKER_TEXT_PACK_BLOCK_H_

#include <cstdint>
#include <vector>

#include "stoker/status.h"
#include "text/pack_plan.h"

namespace stoker {

struct BlockPackOptions {
  uint32_t seq_len = 2048;
  PackMode mode = PackMode::kConcat;
  uint32_t window = 1024;
  bool longest_first = false;  // pack the documents longest first (stable)
  uint64_t shuffle_key = 0;    // != 0: the sequences in an order drawn from it
};

class BlockPacker {
 public:
  // The plan only: the token buffers are read by Fill and must outlive it.
  static Result<BlockPacker> Make(const int64_t* tokens, const uint64_t* starts, const int64_t* ids,
                                  uint64_t documents, const BlockPackOptions& options);
  uint64_t sequences() const { return plan_.sequences(); }
  uint64_t tokens() const { return plan_.tokens; }
  // Every sequence's cu_seqlens entries, end to end.
  uint64_t cu_entries() const { return cu_entries_; }
  // Writes the sequences: four fields of sequences() x seq_len int64, the
  // cu_seqlens of each end to end (cu_entries()), and where each sequence's
  // begin there (sequences() + 1).
  Status Fill(int64_t pad_id, int64_t* input_ids, int64_t* labels, int64_t* position_ids, int64_t* document_ids,
              int32_t* cu_seqlens, int64_t* cu_first) const;

 private:
  BlockPacker() = default;
  const int64_t* tokens_ = nullptr;
  const uint64_t* starts_ = nullptr;
  const int64_t* ids_ = nullptr;
  uint32_t seq_len_ = 0;
  PackPlan plan_;
  std::vector<uint64_t> row_;  // sequence i is written to row row_[i]
  std::vector<uint64_t> cu_at_;  // where row r's cu_seqlens begin (rows + 1)
  uint64_t cu_entries_ = 0;
};

}  // namespace stoker

#endif  // STOKER_TEXT_PACK_BLOCK_H_
