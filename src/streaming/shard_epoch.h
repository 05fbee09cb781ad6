// The epoch of a StreamingDataset: its shards (one ShardSlot each), where each
// one's samples sit in the epoch's index space, and the order this rank
// reads them in.
//
// A ShardSlot goes
//   kWaiting -> kFetching -> kPinned -> kOpen -> kReleased
// (a growing epoch's slots start at kPinned: their shards are cached), or to
// kFailed with the fetch's error.  kOpen is the readers' fast path (no
// lock).  A slot is released (closed, unpinned, evictable) once every read
// the epoch's order has for it is done; a read of a released slot fetches it
// again.  The dataset's mutex guards the states; a slot's open_mu
// serialises opening it.
#ifndef STOKER_STREAMING_SHARD_EPOCH_H_
#define STOKER_STREAMING_SHARD_EPOCH_H_

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cache/shard_cache.h"
#include "streaming/stream_buffer_pool.h"
#include "stoker/native_dataset.h"

namespace stoker::stream {

enum ShardState : int { kWaiting, kFetching, kPinned, kOpen, kReleased, kFailed };

struct ShardSlot {
  uint32_t shard = 0;  // in the remote list
  uint64_t first = 0, count = 0;
  std::atomic<int> state{kWaiting};
  std::atomic<int64_t> remaining{INT64_MAX};  // reads left in the epoch's order
  bool demanded = false;
  bool touched = false;  // a reader has come for it (full mode: its buffer is not taken back)
  ShardCache::Pin pin;
  StreamBuffer* mem = nullptr;  // instead of a pin: the shard is in memory
  std::unique_ptr<NativeDataset> data;
  std::mutex open_mu;
  Status error;
};

struct Epoch {
  uint64_t number = 0;
  std::vector<std::unique_ptr<ShardSlot>> slots;  // by position (index order of their shards)
  std::vector<uint64_t> firsts{0};           // prefix sums of counts
  std::vector<uint32_t> seq;                 // positions in the order this rank reads them
  std::vector<uint32_t> seq_of;              // position -> place in seq
  std::atomic<int64_t> frontier{-1};         // the furthest place in seq read so far (full: 0 once ordered)
  std::atomic<bool> reads_started{false};
  bool ordered = false;
  bool first_window_in = false;              // (FirstWindowInLocked, under the dataset's mutex)
  uint64_t samples() const { return firsts.back(); }
  uint32_t PositionOf(uint64_t index) const {
    return static_cast<uint32_t>(std::upper_bound(firsts.begin(), firsts.end(), index) - firsts.begin()) - 1;
  }
  // The slot at `place` in this rank's reading order.
  ShardSlot& AtPlace(uint64_t place) const { return *slots[seq.empty() ? place : seq[place]]; }
  uint32_t PlaceOf(uint32_t position) const { return seq_of.empty() ? position : seq_of[position]; }
  uint32_t places() const { return static_cast<uint32_t>(seq.empty() ? slots.size() : seq.size()); }
};

}  // namespace stoker::stream

#endif  // STOKER_STREAMING_SHARD_EPOCH_H_
