// WindowOrder: a keyed shuffle of data kept in shards (a Parquet source's
// row groups), with random access: the shards in a shuffled order, then the
// rows of each run of `window` consecutive shards of it shuffled together
// (a FeistelOrder per window).  Reading its positions in order then keeps
// one window of shards open at a time, so each shard is read (decoded) once
// per pass, as a ParquetDataset's own shuffled epoch does
// (OrderRecipe::GlobalByShards; this is the same idea computed per
// position: a Mix takes a source's c-th sample of its source-epoch from it).
// Memory: a few words per shard; At() is a binary search and a FeistelOrder.
#ifndef STOKER_ORDER_WINDOW_ORDER_H_
#define STOKER_ORDER_WINDOW_ORDER_H_

#include <cstdint>
#include <vector>

#include "order/index_order.h"

namespace stoker {

class WindowOrder : public IndexOrder {
 public:
  // sizes: each shard's samples, in index order (shard s holds the indices
  // from the sum of the sizes before it); window >= 1.
  WindowOrder(const std::vector<uint64_t>& sizes, uint32_t window, uint64_t key);
  uint64_t size() const override { return cum_.back(); }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // The index at position `pos` (< size()).
  uint64_t At(uint64_t pos) const;

 private:
  uint32_t window_;
  uint64_t key_;
  std::vector<uint64_t> first_;  // shard -> its first index
  std::vector<uint32_t> shard_;  // place in the shuffled order -> shard
  std::vector<uint64_t> cum_;    // place -> positions before it (places + 1)
};

}  // namespace stoker

#endif  // STOKER_ORDER_WINDOW_ORDER_H_
