// IndexOrder: an epoch's order of sample indices, as the EpochSource reads
// it: its length, and a run of it that may not be final yet (Read waits for
// it).  A vector is one (VectorOrder); a permutation still being drawn on a
// background thread is another (order/torch_randperm.h), and so is one
// computed per position with no storage at all (order/feistel_order.h).
// Thread safety: Read may be called from any thread.
#ifndef STOKER_ORDER_INDEX_ORDER_H_
#define STOKER_ORDER_INDEX_ORDER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "stoker/status.h"

namespace stoker {

class IndexOrder {
 public:
  virtual ~IndexOrder() = default;
  virtual uint64_t size() const = 0;
  // order[pos, pos + n) into out (pos + n <= size()), waiting until they
  // are final.  Cancelled if the order was stopped before they were.
  virtual Status Read(uint64_t pos, uint64_t n, int64_t* out) = 0;
};

class VectorOrder : public IndexOrder {
 public:
  explicit VectorOrder(std::vector<int64_t> v) : v_(std::move(v)) {}
  uint64_t size() const override { return v_.size(); }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  const std::vector<int64_t>& values() const { return v_; }

 private:
  std::vector<int64_t> v_;
};

// Rank `rank`'s part of `base` as torch's DistributedSampler takes it:
// `base` made `total` long (repeated from its start, or cut), then every
// world-th place from `rank` on.
class StridedRankOrder : public IndexOrder {
 public:
  StridedRankOrder(std::shared_ptr<IndexOrder> base, uint64_t total, uint32_t rank, uint32_t world);
  uint64_t size() const override { return size_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;

 private:
  std::shared_ptr<IndexOrder> base_;
  uint64_t total_, size_;
  uint32_t rank_, world_;
};

}  // namespace stoker

#endif  // STOKER_ORDER_INDEX_ORDER_H_
