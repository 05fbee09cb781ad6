// RowGroupCache: decoded row groups of a ParquetDataset under a byte
// budget, shared by the reader threads.  Each row group is decoded by one
// thread: the cache's decoder ahead (SetAhead), or a reader that needs it; a
// thread that needs a row group another is decoding decodes the
// next one of the epoch's order meanwhile (when there is room, or room
// taken by row groups whose rows were all read), so that readers reading in
// order decode in parallel.  Finished row groups, then the least recently
// used ones no reader holds, are dropped when room is needed; a row group
// held by readers is never dropped, so the budget can be passed by what
// readers hold at once (counted: peak_decoded_bytes).
#ifndef STOKER_PARQUET_ROW_GROUP_CACHE_H_
#define STOKER_PARQUET_ROW_GROUP_CACHE_H_

#include <arrow/api.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/types.h>

#include "stoker/parquet_dataset.h"
#include "stoker/status.h"

namespace stoker {

class RowGroupCache {
 public:
  using Table = std::shared_ptr<const arrow::Table>;
  // decode(g): row group g decoded (one chunk per column).  estimate(g):
  // its decoded bytes before decoding (for the room check).
  RowGroupCache(uint32_t row_groups, uint64_t budget, std::function<Result<Table>(uint32_t)> decode,
                std::function<uint64_t(uint32_t)> estimate);
  ~RowGroupCache();

  Result<Table> Get(uint32_t g);
  // Every row of g was read (this epoch): g goes first when room is needed,
  // and its room may take the next row group ahead.
  void Finished(uint32_t g);
  // The row groups in the order readers will first need them.  The first
  // read in this process (not in a process forked from it) then starts a
  // thread that decodes ahead of the readers in that order: the loader's
  // prefetch keeps readers only a few batches ahead, less than a row group,
  // so without it a row group is read and decoded only when a reader
  // reaches it (a cold sequential epoch waited for each file read).
  void SetAhead(std::vector<uint32_t> order);
  ParquetStats stats() const;
  uint64_t budget() const {
    std::lock_guard<std::mutex> l(mu_);
    return budget_;
  }
  // A new budget (a loader sizes it to what its epochs need); a smaller one
  // drops decoded row groups as later decodes need room.
  void SetBudget(uint64_t budget);

 private:
  enum State : uint8_t { kEmpty, kLoading, kReady, kFailed };
  struct Entry {
    State state = kEmpty;
    Table table;
    uint64_t bytes = 0, used = 0;  // used: a tick, for LRU
    bool finished = false;         // every row read since it was last needed
    Status error;
  };
  // Under mu_: drops unheld row groups (finished_only: finished ones only),
  // finished then least recently used first, until `need` more bytes fit;
  // whether they fit.
  bool MakeRoomLocked(uint64_t need, bool finished_only);
  // Under mu_ (released meanwhile): decodes g and publishes it.  ahead (a
  // row group no reader waits for yet): only if the room is free or taken
  // by finished row groups, never a row group readers are still reading;
  // false, with nothing done, when there is no such room.
  bool LoadLocked(std::unique_lock<std::mutex>& l, uint32_t g, bool ahead);
  void AheadMain();

  uint64_t budget_;  // (under mu_)
  std::function<Result<Table>(uint32_t)> decode_;
  std::function<uint64_t(uint32_t)> estimate_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> ahead_;    // the order of first use
  std::vector<uint32_t> ahead_at_;  // row group -> its place in ahead_
  uint64_t tick_ = 0;
  // Decoded bytes per estimated byte, the most seen: the room asked for a
  // row group is its estimate times this (Arrow's buffers are larger than
  // the uncompressed column chunks the estimate counts).
  double size_ratio_ = 1.0;
  uint32_t reached_ = 0;  // the furthest place in ahead_ a reader asked for
  bool stop_ = false;
  std::unique_ptr<std::thread> ahead_thread_;  // the decoder ahead
  pid_t owner_ = 0;  // the process that set the order (a forked child starts no decoder)
  ParquetStats stats_;
};

}  // namespace stoker

#endif  // STOKER_PARQUET_ROW_GROUP_CACHE_H_
