// PackPlan: which pieces of which documents make each packed sequence of
// seq_len tokens, from the documents' lengths alone (no token is read).
//
//   concat:   the documents one after another as one stream, cut every
//             seq_len tokens: no padding but the last sequence's, every
//             token exactly once; a document may span sequences.
//   best_fit: documents kept whole (one longer than seq_len is cut into
//             seq_len pieces and a rest), each placed into the open
//             sequence it fills most tightly among at most `window` open
//             ones (the smallest room it fits); when none has room and
//             `window` are open, the fullest is closed.  The open ones are
//             closed at the end, oldest first.  Every token exactly once.
// Sequences come out in the order they are closed.  A document of no
// tokens (and with append_eos, never) takes no place.
#ifndef STOKER_TEXT_PACK_PLAN_H_
#define STOKER_TEXT_PACK_PLAN_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "stoker/status.h"

namespace stoker {

struct PackPiece {
  uint64_t doc = 0;     // the document (the dataset's index)
  uint32_t offset = 0;  // its first token in the document
  uint32_t length = 0;  // tokens
};

struct PackPlan {
  std::vector<PackPiece> pieces;
  std::vector<uint64_t> first;  // sequence i is pieces [first[i], first[i + 1])
  uint64_t sequences() const { return first.empty() ? 0 : first.size() - 1; }
  uint64_t tokens = 0;          // in every piece (the rest of sequences() * seq_len is padding)
};

enum class PackMode : uint8_t { kConcat = 0, kBestFit = 1 };

// docs: the documents in packing order (dataset indices); length(doc): its
// tokens (with the end-of-document id if one is appended).
Result<PackPlan> MakePackPlan(const std::vector<uint64_t>& docs, const std::function<uint32_t(uint64_t)>& length,
                              uint32_t seq_len, PackMode mode, uint32_t window);

}  // namespace stoker

#endif  // STOKER_TEXT_PACK_PLAN_H_
