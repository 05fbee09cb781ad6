// EpochSource: an epoch's order (this rank's indices, OrderRecipe) served
// to the Scheduler as batches, with no interpreter involved.  The C++ API's
// Loader and the Python DataLoader (for samplers whose order is native:
// StreamingDataset's) both use it: one epoch protocol.
//
//   Begin(order, batch_size, drop_last)   a new epoch
//   Next()                                 batch k's indices (token k + 1)
//   BatchIndices(token)                    a batch's indices again (reports)
// Resuming mid-epoch is the Scheduler's (SkipDelivered: the batches already
// delivered are not sent again); the order itself is a function of the
// OrderRecipe, so nothing of it is saved.
#ifndef STOKER_LOADER_EPOCH_SOURCE_H_
#define STOKER_LOADER_EPOCH_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "order/index_order.h"
#include "loader/scheduler.h"

namespace stoker {

class EpochSource : public IndexSource {
 public:
  using Order = std::shared_ptr<IndexOrder>;
  // batch_size 0: one sample per task, not collated (torch's batch_size=None).
  // A batch's indices are read when it is sent: an order still being drawn
  // (TorchRandperm) sends its first batches before it is complete.
  void Begin(Order order, uint64_t batch_size, bool drop_last);
  void Begin(std::vector<int64_t> order, uint64_t batch_size, bool drop_last) {
    Begin(std::make_shared<VectorOrder>(std::move(order)), batch_size, drop_last);
  }
  uint64_t batches() const { return batches_; }
  uint64_t samples() const { return order_->size(); }
  Result<bool> Next(TaskSpec* spec) override;
  // (without reading the batch's indices: a resumed order may not have them,
  // IndexOrder::NotBefore)
  Result<bool> Skip() override;
  // The indices of the batch holding `token` (empty for an unknown token).
  std::vector<int64_t> BatchIndices(uint64_t token) const;
  // The same, as "[i, j, ...]" (at most 16 shown) for messages.
  std::string Describe(uint64_t token) const;

 private:
  uint64_t per() const { return bs_ ? bs_ : 1; }
  Order order_ = std::make_shared<VectorOrder>(std::vector<int64_t>{});
  uint64_t bs_ = 1, batches_ = 0, next_ = 0;
};

}  // namespace stoker

#endif  // STOKER_LOADER_EPOCH_SOURCE_H_
