// OrderRecipe (include/stoker/order_recipe.h).  Shuffles are Fisher-Yates
// driven by Mix64 (core/mix.h): the same permutation for the same
// (seed, epoch) on every machine and in every process.
#include "stoker/order_recipe.h"

#include <algorithm>
#include <numeric>

#include "core/mix.h"
#include "order/index_order.h"

namespace stoker {

uint64_t OrderRecipe::ShuffleSeed() const { return Mix64(seed ^ Mix64(epoch + 0x5bd1e995)); }

void OrderRecipe::FitToRanks(std::vector<int64_t>* all) const {
  const uint64_t n = all->size(), total = PerRank(n) * std::max<uint32_t>(1, world_size);
  for (uint64_t i = n; i < total; ++i) all->push_back((*all)[(i - n) % n]);
  all->resize(total);
}

uint64_t OrderRecipe::PerRank(uint64_t n) const {
  const uint64_t w = std::max<uint32_t>(1, world_size);
  return n == 0 ? 0 : pad ? (n + w - 1) / w : n / w;
}

std::vector<int64_t> OrderRecipe::Global(uint64_t n) const {
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), int64_t{0});
  if (shuffle) MixShuffle(all.begin(), all.end(), ShuffleSeed());
  return all;
}

std::vector<int64_t> OrderRecipe::GlobalByShards(const std::vector<std::pair<uint64_t, uint64_t>>& shards,
                                                 uint32_t window) const {
  const size_t P = shards.size(), W = std::max<uint32_t>(1, window);
  std::vector<size_t> pos(P);
  std::iota(pos.begin(), pos.end(), size_t{0});
  const uint64_t base = ShuffleSeed();
  if (shuffle) MixShuffle(pos.begin(), pos.end(), base);
  uint64_t total = 0;
  for (const auto& s : shards) total += s.second;
  std::vector<int64_t> all;
  all.reserve(total);
  for (size_t w0 = 0; w0 < P; w0 += W) {
    const size_t start = all.size();
    for (size_t k = w0; k < std::min(P, w0 + W); ++k) {
      const auto& [first, count] = shards[pos[k]];
      for (uint64_t j = 0; j < count; ++j) all.push_back(static_cast<int64_t>(first + j));
    }
    if (shuffle) MixShuffle(all.begin() + static_cast<int64_t>(start), all.end(), Mix64(base ^ Mix64(w0 + 1)));
  }
  return all;
}

std::vector<int64_t> OrderRecipe::RankPart(std::vector<int64_t> all, RankSplit split) const {
  // The padding and split of StridedRankOrder and ContiguousRankOrder: one
  // rule each, here and for an order read lazily (a resumed epoch's rest).
  const uint64_t w = std::max<uint32_t>(1, world_size), total = PerRank(all.size()) * w;
  auto base = std::make_shared<VectorOrder>(std::move(all));
  std::unique_ptr<IndexOrder> part;
  if (split == RankSplit::kStrided) {
    part = std::make_unique<StridedRankOrder>(base, total, rank, w);
  } else {
    part = std::make_unique<ContiguousRankOrder>(base, total, rank, w);
  }
  std::vector<int64_t> mine(part->size());
  (void)part->Read(0, mine.size(), mine.data());  // (a vector's positions are all final)
  return mine;
}

}  // namespace stoker
