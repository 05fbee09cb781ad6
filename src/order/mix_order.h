// MixOrder: the order of a mixed epoch over k sources with weights, as an
// IndexOrder of global indices (source i's sample j is offset(i) + j, the
// sources laid end to end).
//
// Position p (n = p + 1 samples so far) takes its source by the largest
// deficit: the source i with the largest w_i * n - c_i, c_i the samples it
// took before p (ties to the lowest i; Megatron's blending rule).  Every
// prefix is then within one sample of the weights: |c_i(n) - w_i * n| <= 1
// for every n and i, where a weighted random draw per sample strays by
// sqrt(w_i * n).  The source's sample is the next of its own order: its
// c_i-th, in source-epoch c_i / size_i, shuffled by a keyed Feistel
// permutation of (seed, epoch, i, source-epoch) when `shuffle`, in order
// otherwise; a source kept in shards (`shards`: a Parquet source's row
// groups) is shuffled by windows of shards instead (order/window_order.h),
// so that reading it keeps a window of its shards open, not all of them.
// A source that runs out starts its next source-epoch (cycle),
// or, with `stop`, the mixed epoch ends before any source would.
//
// A mix that changed at a resume (weights, sources added or removed) goes on
// from where the saved one stopped: `base` holds each source's samples taken
// before the change, `start` the mixed positions before it.  Deficits count
// from the change point (n = positions since it, c_i the samples since it),
// so the new weights hold at every prefix of the rest, and each source goes
// on in its own order from sample base_i, repeating none of its source-epoch.
// A source's shuffle is keyed by `keys` (its identity across a change: the
// index + 1 by default, a digest of its name for a named source).
//
// The order is a function of the spec alone: nothing is stored per sample.
// It is computed as it is read, from the last of the checkpoints it keeps
// (the counters every 2^16 positions).  The largest deficit is kept by a
// kinetic tournament over the sources: each node holds the winner of its
// subtree and the step until which that winner cannot change (the crossing
// of its two children's deficit lines); a position recomputes the chosen
// source's path and the nodes whose crossing came, not all k sources.
// Thread safety: Read may be called from any thread (a mutex).
#ifndef STOKER_ORDER_MIX_ORDER_H_
#define STOKER_ORDER_MIX_ORDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "order/index_order.h"
#include "order/window_order.h"
#include "stoker/status.h"

namespace stoker {

struct MixSpec {
  std::vector<uint64_t> sizes;   // each source's samples (> 0)
  std::vector<double> weights;   // each source's weight (> 0; normalised)
  uint64_t seed = 0, epoch = 0;
  bool shuffle = false;
  uint64_t samples = 0;          // the mixed epoch's length; 0: the sum of the sizes
  bool stop = false;             // true: the epoch ends before a source would run out
  std::vector<uint64_t> keys;    // each source's shuffle key (empty: index + 1)
  std::vector<uint64_t> base;    // samples each source took before the change (empty: none)
  uint64_t start = 0;            // the mixed positions before the change (the order is samples - start long)
  // A known cursor: the counters (since the change) at position `at` of this
  // order, so that reading from there replays nothing (a resume's state).
  uint64_t at = 0;
  std::vector<uint64_t> at_counts;
  // Sources kept in shards (empty: none; else one per source, `sizes` empty
  // for a source that is not): each shard's samples, in index order, and
  // the shards a shuffled source-epoch mixes at a time.
  struct Shards {
    uint32_t window = 1;
    std::vector<uint64_t> sizes;
  };
  std::vector<Shards> shards;
};

class MixOrder : public IndexOrder {
 public:
  static Result<std::shared_ptr<MixOrder>> Make(MixSpec spec);
  uint64_t size() const override { return samples_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // One walk under one lock (a rank's part of the mixed epoch).
  Status ReadStrided(uint64_t first, uint64_t stride, uint64_t n, int64_t* out) override;
  // The samples each source took before position `pos` (<= size()) of this
  // order (since the change: add spec().base for the epoch's).
  std::vector<uint64_t> Counters(uint64_t pos);
  // Where global index `g` comes from: (source, index within it).
  std::pair<uint32_t, uint64_t> Locate(uint64_t g) const;
  uint64_t offset(uint32_t source) const { return offsets_[source]; }
  const MixSpec& spec() const { return spec_; }

 private:
  explicit MixOrder(MixSpec spec);
  // Moves the cursor to `pos` (from the nearest checkpoint at or below it).
  void Seek(uint64_t pos);
  // The cursor's position: its source chosen, its sample's global index; advances.
  int64_t Step();
  // The kinetic tournament (tree_[1] is the root; leaves from leaves_ on).
  struct Node {
    uint32_t win;    // the source with the largest deficit below this node (kNone: none)
    uint64_t until;  // ... at every step before this one (0: recompute)
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  bool Ahead(uint32_t a, uint32_t b, double n) const;  // a's deficit above b's at step n (ties: lower index)
  void Refresh(size_t node, uint64_t n);
  void Invalidate();  // every internal node, after the counters were set

  MixSpec spec_;
  std::vector<double> w_;           // normalised weights
  std::vector<uint64_t> offsets_;   // k + 1
  uint64_t samples_ = 0;
  std::mutex mu_;
  uint64_t pos_ = 0;                 // the cursor
  std::vector<uint64_t> counts_;     // samples each source took before pos_
  std::map<uint64_t, std::vector<uint64_t>> checkpoints_;  // position -> counters
  std::vector<Node> tree_;
  size_t leaves_ = 1;
  // A sharded source's order of its current source-epoch (made when first
  // needed): the source-epoch it is of, and the order.
  struct Windowed {
    uint64_t source_epoch = UINT64_MAX;
    std::unique_ptr<WindowOrder> order;
  };
  std::vector<Windowed> windowed_;
};

}  // namespace stoker

#endif  // STOKER_ORDER_MIX_ORDER_H_
