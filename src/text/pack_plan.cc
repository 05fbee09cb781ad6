// PackPlan (pack_plan.h).
#include "text/pack_plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

namespace stoker {

namespace {

// Sequences under construction for best_fit: open ones by the room they
// have left (smallest first), each with its pieces.
class OpenBins {
 public:
  OpenBins(uint32_t seq_len, uint32_t window, PackPlan* plan) : seq_len_(seq_len), window_(window), plan_(plan) {}

  void Add(const PackPiece& p) {
    auto it = room_.lower_bound({p.length, 0});  // the tightest that fits
    if (it == room_.end()) {
      if (room_.size() == window_) Close(room_.begin());  // the fullest
      it = room_.emplace(std::make_pair(seq_len_, next_id_++), std::vector<PackPiece>{}).first;
    }
    auto node = room_.extract(it);
    node.key().first -= p.length;
    node.mapped().push_back(p);
    if (node.key().first == 0) {
      Emit(node.mapped());
    } else {
      room_.insert(std::move(node));
    }
  }

  void CloseAll() {
    std::map<uint64_t, std::vector<PackPiece>> by_age;
    for (auto& [key, pieces] : room_) by_age.emplace(key.second, std::move(pieces));
    room_.clear();
    for (auto& [id, pieces] : by_age) Emit(pieces);
  }

 private:
  using Room = std::map<std::pair<uint32_t, uint64_t>, std::vector<PackPiece>>;  // (room, id) -> pieces
  void Close(Room::iterator it) {
    Emit(it->second);
    room_.erase(it);
  }
  void Emit(const std::vector<PackPiece>& pieces) {
    plan_->pieces.insert(plan_->pieces.end(), pieces.begin(), pieces.end());
    plan_->first.push_back(plan_->pieces.size());
  }
  uint32_t seq_len_, window_;
  PackPlan* plan_;
  Room room_;
  uint64_t next_id_ = 0;
};

}  // namespace

Result<PackPlan> MakePackPlan(const std::vector<uint64_t>& docs, const std::function<uint32_t(uint64_t)>& length,
                              uint32_t seq_len, PackMode mode, uint32_t window) {
  if (seq_len == 0) return Status::InvalidArgument("Pack: seq_len must be >= 1");
  if (mode == PackMode::kBestFit && window == 0) return Status::InvalidArgument("Pack: window must be >= 1");
  PackPlan plan;
  plan.first.push_back(0);
  if (mode == PackMode::kConcat) {
    uint32_t room = seq_len;
    for (uint64_t d : docs) {
      const uint32_t n = length(d);
      plan.tokens += n;
      for (uint32_t at = 0; at < n;) {
        const uint32_t take = std::min(room, n - at);
        plan.pieces.push_back({d, at, take});
        at += take;
        room -= take;
        if (room == 0) {
          plan.first.push_back(plan.pieces.size());
          room = seq_len;
        }
      }
    }
    if (room != seq_len) plan.first.push_back(plan.pieces.size());
    return plan;
  }
  OpenBins bins(seq_len, window, &plan);
  for (uint64_t d : docs) {
    const uint32_t n = length(d);
    plan.tokens += n;
    uint32_t at = 0;
    for (; n - at >= seq_len; at += seq_len) {  // whole sequences of a long document
      plan.pieces.push_back({d, at, seq_len});
      plan.first.push_back(plan.pieces.size());
    }
    if (at < n) bins.Add({d, at, n - at});
  }
  bins.CloseAll();
  return plan;
}

Status FillPackedSequence(const PackPlan& plan, uint64_t index, uint32_t seq_len, int64_t pad_id,
                          const PackSource& source, int64_t* input_ids, int64_t* labels, int64_t* position_ids,
                          int64_t* document_ids, std::vector<int32_t>* cu) {
  const uint64_t L = seq_len;
  thread_local std::vector<int64_t> ids;  // (one more than L: a piece's next token)
  ids.resize(L + 1);
  cu->assign(1, 0);
  uint64_t at = 0;
  for (uint64_t p = plan.first[index]; p < plan.first[index + 1]; ++p) {
    const PackPiece& piece = plan.pieces[p];
    // One token more where the document goes on: the last label.
    const bool more = piece.offset + piece.length < source.length(piece.doc);
    STOKER_RETURN_IF_ERROR(source.tokens(piece.doc, piece.offset, piece.length + (more ? 1 : 0), ids.data() + at));
    const int64_t id = source.id(piece.doc);
    for (uint64_t j = 0; j < piece.length; ++j) {
      labels[at + j] = j + 1 < piece.length || more ? ids[at + j + 1] : -100;
      position_ids[at + j] = static_cast<int64_t>(j);
      document_ids[at + j] = id;
    }
    at += piece.length;
    cu->push_back(static_cast<int32_t>(at));
  }
  for (uint64_t j = at; j < L; ++j) {
    ids[j] = pad_id;
    labels[j] = -100;
    position_ids[j] = static_cast<int64_t>(j - at);
    document_ids[j] = -1;
  }
  if (at < L) cu->push_back(static_cast<int32_t>(L));
  std::memcpy(input_ids, ids.data(), L * sizeof(int64_t));
  return Status::OK();
}

}  // namespace stoker
