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
  // order[first + k * stride] for k < n (every place < size()): a rank's
  // part of it (StridedRankOrder).  By default a Read of each place, or one
  // Read when stride is 1; an order computed from its start (a Mix's) walks
  // the places at once.
  virtual Status ReadStrided(uint64_t first, uint64_t stride, uint64_t n, int64_t* out);
  // A promise made before the first Read: no place below `place` will be
  // read (a resumed epoch's consumed start).  An order drawn from its start
  // (TorchRandperm) may then reach `place` without keeping what lies before
  // it, and refuse reads there; others ignore it.
  virtual void NotBefore(uint64_t place) { (void)place; }
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

// 0, 1, ..., n-1 with no storage (an unshuffled epoch of any size).
class IotaOrder : public IndexOrder {
 public:
  explicit IotaOrder(uint64_t n) : n_(n) {}
  uint64_t size() const override { return n_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;

 private:
  uint64_t n_;
};

// Rank `rank`'s part of `base` as torch's DistributedSampler takes it:
// `base` made `total` long (repeated from its start, or cut), then every
// world-th place from `rank` on.
class StridedRankOrder : public IndexOrder {
 public:
  StridedRankOrder(std::shared_ptr<IndexOrder> base, uint64_t total, uint32_t rank, uint32_t world);
  uint64_t size() const override { return size_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // (made to base unless the padding wraps to base's start)
  void NotBefore(uint64_t pos) override;

 private:
  std::shared_ptr<IndexOrder> base_;
  uint64_t total_, size_;
  uint32_t rank_, world_;
};

// Rank `rank`'s part of `base` as the contiguous split takes it
// (StreamingDataset's: a shard's samples stay on few ranks): `base` made
// `total` long (repeated from its start, or cut), then the rank-th of
// `world` equal runs.
class ContiguousRankOrder : public IndexOrder {
 public:
  ContiguousRankOrder(std::shared_ptr<IndexOrder> base, uint64_t total, uint32_t rank, uint32_t world);
  uint64_t size() const override { return per_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // (made to base unless the padding wraps to base's start)
  void NotBefore(uint64_t pos) override;

 private:
  std::shared_ptr<IndexOrder> base_;
  uint64_t per_, first_;
};

// A run of places [begin, end) of an order.
struct PlaceRange {
  uint64_t begin = 0, end = 0;
  bool operator==(const PlaceRange&) const = default;
};

// What is left of `base` once the places in `consumed` are taken out, in
// base's order: an epoch resumed on another topology reads this (the places
// the ranks before had consumed, docs/design/epoch_protocol.md).  `consumed`
// may be in any order and overlap; places past base's end are ignored.
// Position p costs a binary search over the ranges; nothing is copied.
class RemainderOrder : public IndexOrder {
 public:
  RemainderOrder(std::shared_ptr<IndexOrder> base, std::vector<PlaceRange> consumed);
  uint64_t size() const override { return size_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // (made to base's place of `pos`; the constructor makes base's promise of
  // a consumed start itself)
  void NotBefore(uint64_t pos) override;
  // The ranges taken out: sorted, disjoint, within base's length.
  const std::vector<PlaceRange>& consumed() const { return ranges_; }

 private:
  // base's place of remainder position `pos`, and how many places after it
  // are kept before the next consumed range (the run it starts).
  void Locate(uint64_t pos, uint64_t* place, uint64_t* run) const;
  std::shared_ptr<IndexOrder> base_;
  std::vector<PlaceRange> ranges_;
  std::vector<uint64_t> kept_before_;  // remainder positions before range i
  uint64_t size_ = 0;
};

// The places of a global order that W ranks consumed, each having read the
// positions `read` (ranges of positions in its own part; the ranks in
// lockstep read the same ones): with the strided split (DistributedSampler's),
// position j of every rank is places [j*W, (j+1)*W); with the contiguous split
// of a global order of `total` places (each rank a run of total/W), rank r's
// position j is place r*total/W + j.
std::vector<PlaceRange> ConsumedPlaces(const std::vector<PlaceRange>& read, uint32_t world, bool strided,
                                       uint64_t total);

}  // namespace stoker

#endif  // STOKER_ORDER_INDEX_ORDER_H_
