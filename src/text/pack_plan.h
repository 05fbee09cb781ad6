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
  // Sequence i's segments of variable-length attention: its pieces, and
  // its padding if it has any (its cu_seqlens has one entry more).
  uint64_t Segments(uint64_t i, uint32_t seq_len) const {
    uint64_t used = 0;
    for (uint64_t p = first[i]; p < first[i + 1]; ++p) used += pieces[p].length;
    return first[i + 1] - first[i] + (used < seq_len ? 1 : 0);
  }
};

enum class PackMode : uint8_t { kConcat = 0, kBestFit = 1 };

// docs: the documents in packing order (dataset indices); length(doc): its
// tokens (with the end-of-document id if one is appended).
Result<PackPlan> MakePackPlan(const std::vector<uint64_t>& docs, const std::function<uint32_t(uint64_t)>& length,
                              uint32_t seq_len, PackMode mode, uint32_t window);

// Where a plan's documents come from, to write its sequences out.
struct PackSource {
  std::function<uint32_t(uint64_t)> length;  // a document's tokens (with an appended eos)
  // Tokens [offset, offset + n) of a document into out.
  std::function<Status(uint64_t doc, uint64_t offset, uint64_t n, int64_t* out)> tokens;
  std::function<int64_t(uint64_t)> id;  // what document_ids says for the document
};

// Sequence `index` of `plan`, each field seq_len int64: input_ids (then
// pad_id), labels (each token's next in its document, the true next one
// where a piece ends inside its document; -100 after a document's last
// token and on padding), position_ids (from 0 at each piece, and at the
// padding), document_ids (-1 on padding); cu gets the segments' boundaries,
// 0 ... seq_len (the padding a segment of its own).
Status FillPackedSequence(const PackPlan& plan, uint64_t index, uint32_t seq_len, int64_t pad_id,
                          const PackSource& source, int64_t* input_ids, int64_t* labels, int64_t* position_ids,
                          int64_t* document_ids, std::vector<int32_t>* cu);

}  // namespace stoker

#endif  // STOKER_TEXT_PACK_PLAN_H_
