// RowGroupCache: decoded row groups of a ParquetDataset under a byte
// budget, shared by the reader threads.  Each row group is decoded by one
// thread: the cache's decoder ahead (SetAhead), or a reader that needs it; a
// thread that needs a row group another is decoding decodes the
// next one of the epoch's order meanwhile (when there is room, or room
// taken by row groups whose rows were all read), so that readers reading in
// order decode in parallel.  When room is needed, row groups go in this
// order: finished ones (every row read), least recently used first; then,
// for a reader, none while row groups wholly behind it in the order (their
// rows left are other readers', a few batches behind) are being finished:
// it waits for them, up to kBehindWait (a shuffled epoch's window is read
// to its last rows while the next window begins, and dropping its row
// groups then decoded ~19% of them twice); then row groups decoded ahead
// and not read yet, the one needed last first; then the least recently
// used.  A row group held by readers is never dropped, so the budget can be
// passed by what readers hold at once (counted: peak_decoded_bytes).
#ifndef STOKER_PARQUET_ROW_GROUP_CACHE_H_
#define STOKER_PARQUET_ROW_GROUP_CACHE_H_

#include <arrow/api.h>

#include <chrono>
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
  // decode(g): row group g decoded (its columns in chunks of the same
  // rows).  estimate(g): its decoded bytes before decoding (for the room
  // check).
  RowGroupCache(uint32_t row_groups, uint64_t budget, std::function<Result<Table>(uint32_t)> decode,
                std::function<uint64_t(uint32_t)> estimate);
  ~RowGroupCache();

  Result<Table> Get(uint32_t g);
  // Every row of g was read (this epoch): g goes first when room is needed,
  // and its room may take the next row group ahead.
  void Finished(uint32_t g);
  // The epoch's order: the row group of each of its positions.  The first
  // read in this process (not in a process forked from it) then starts a
  // thread that decodes ahead of the readers, in the order of first use:
  // the loader's prefetch keeps readers only a few batches ahead, less than
  // a row group, so without it a row group is read and decoded only when a
  // reader reaches it (a cold sequential epoch waited for each file read).
  // Each row group's first and last positions order the room's making.
  void SetAhead(const std::vector<uint32_t>& group_at);
  // How long a reader waits for row groups behind it to be finished before
  // it drops them (readers that never finish one: a resumed epoch, a
  // skipped row; such row groups then count as finished).
  static constexpr std::chrono::milliseconds kBehindWait{200};
  ParquetStats stats() const;
  uint64_t budget() const {
    std::lock_guard<std::mutex> l(mu_);
    return budget_;
  }
  // A new budget (a loader sizes it to what its epochs need); a smaller one
  // drops decoded row groups as later decodes need room.
  void SetBudget(uint64_t budget);
  // Drops every decoded row group no reader holds (a global shuffle's
  // epoch reads pages instead).
  void DropUnheld();
  // Without positions (SetAhead not given: a Mix's source), whether a
  // reader that needs room waits for the row groups begun and not finished
  // (a shuffle window's last rows) before it drops any.  Off for reads in
  // no known pattern, where row groups are all begun at once.
  void SetWaitForBegun(bool on);

 private:
  enum State : uint8_t { kEmpty, kLoading, kReady, kFailed };
  struct Entry {
    State state = kEmpty;
    Table table;
    uint64_t bytes = 0, used = 0;  // used: a tick, for LRU (0: not read since decoded)
    bool finished = false;         // every row read since it was last needed
    Status error;
  };
  // Under mu_: drops unheld finished row groups, least recently used first,
  // until `need` more bytes fit (beside those decodes under way asked
  // for); unfinished_too (a reader's room, after the wait) then unheld
  // unfinished ones, in the header's order.  Whether they fit.
  bool MakeRoomLocked(uint64_t need, bool unfinished_too);
  // Under mu_: h is decoded, unfinished, and its last position comes
  // before g's first (other readers are finishing it).  Without positions
  // (a Mix's source, whose order is the Mix's) and with wait_for_begun_: h
  // is another row group begun and not finished (a shuffle window's, as the
  // next one begins).
  bool BehindLocked(uint32_t h, uint32_t g) const;
  // Under mu_: reader of g (l held) makes room for `need`, waiting for the
  // row groups behind it first (up to kBehindWait).
  void MakeRoomForReaderLocked(std::unique_lock<std::mutex>& l, uint64_t need, uint32_t g);
  // Under mu_ (released meanwhile): decodes g and publishes it.  ahead (a
  // row group no reader waits for yet): only if the room is free or taken
  // by finished row groups, never a row group readers are still reading;
  // false, with nothing done, when there is no such room.
  bool LoadLocked(std::unique_lock<std::mutex>& l, uint32_t g, bool ahead);
  void AheadMain();

  uint64_t budget_;  // (under mu_)
  uint64_t loading_bytes_ = 0;  // the room decodes under way asked for (under mu_)
  std::function<Result<Table>(uint32_t)> decode_;
  std::function<uint64_t(uint32_t)> estimate_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool wait_for_begun_ = false;  // (under mu_) SetWaitForBegun
  std::vector<Entry> entries_;
  std::vector<uint32_t> ahead_;    // the order of first use
  std::vector<uint32_t> ahead_at_;  // row group -> its place in ahead_
  std::vector<uint64_t> first_, last_;  // row group -> its first and last positions (UINT64_MAX: none)
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
