// stoker::OrderRecipe: what an epoch's sample order depends on (a recipe:
// the order is made from it, by the one place that turns it into indices,
// src/order/order_recipe.cc).  It was called SampleOrder.
//
// An epoch's order is built in two steps, the same for every dataset:
//   1. the global order: every rank's indices for the epoch, a function of
//      (seed, epoch) only: the identity, a shuffle of [0, n), or a shuffle
//      of windows of shards (StreamingDataset);
//   2. this rank's part: the global order made a multiple of world_size
//      long (padded by repeating from its start, or cut), then split.
// docs/design/epoch_protocol.md says how resuming on another world size and
// mixing datasets build on these two steps.
#ifndef STOKER_ORDER_RECIPE_H_
#define STOKER_ORDER_RECIPE_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace stoker {

// How the global order is split between ranks.
enum class RankSplit : uint8_t {
  kStrided = 0,     // rank r takes places r, r + w, r + 2w, ... (torch's DistributedSampler)
  kContiguous = 1,  // rank r takes the r-th of w equal runs (keeps a shard's samples on one rank)
};

struct OrderRecipe {
  uint64_t epoch = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  uint32_t rank = 0, world_size = 1;
  bool pad = true;  // ranks get equal shares by repeating samples (false: drop the tail)
  // The seed of the epoch's shuffle, drawn from (seed, epoch).
  uint64_t ShuffleSeed() const;
  // Makes `all` (the epoch's order, every rank's) a multiple of world_size
  // long: padded by repeating from its start, or cut (pad false).
  void FitToRanks(std::vector<int64_t>* all) const;
  // Samples each rank reads of a global order of `n`.
  uint64_t PerRank(uint64_t n) const;

  // Step 1: the global order of [0, n), shuffled when `shuffle`.
  std::vector<int64_t> Global(uint64_t n) const;
  // Step 1 for data in shards ({first index, samples} each, in index order):
  // shards shuffled, then the samples of each run of `window` shards
  // shuffled together; in shard order when not `shuffle`.
  std::vector<int64_t> GlobalByShards(const std::vector<std::pair<uint64_t, uint64_t>>& shards, uint32_t window) const;
  // Step 2: this rank's part of a global order.
  std::vector<int64_t> RankPart(std::vector<int64_t> all, RankSplit split) const;
};

// The old name.
using SampleOrder [[deprecated("stoker::SampleOrder is now stoker::OrderRecipe (stoker/order_recipe.h)")]] = OrderRecipe;

}  // namespace stoker

#endif  // STOKER_ORDER_RECIPE_H_
