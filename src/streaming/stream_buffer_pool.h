// StreamBufferPool: the memory a full-mode StreamingDataset streams shards
// into when its cache has no room for them.  A shard lives in one buffer
// from its download until the readers are done with it.  The buffers are
// anonymous memory, made once and reused from shard to shard: no page is
// allocated, mapped or freed per shard, and the readers read a shard in
// place.  Huge pages where the kernel has them, except on a guest whose
// host takes free memory back (core/host_memory.h), where a fresh huge page
// costs more than its 512 small ones.  A buffer is mapped by the fetcher
// about to fill it (Back, outside the dataset's mutex), which backs its
// pages a few MiB at a time just ahead of the receive, not faulted in one
// by one as the bytes land.
//
// Not thread-safe: the dataset calls it under its own mutex (Back aside).
#ifndef STOKER_STREAMING_STREAM_BUFFER_POOL_H_
#define STOKER_STREAMING_STREAM_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

struct StreamBuffer {
  uint8_t* map = nullptr;  // null until its first Back
  uint64_t capacity = 0;
  uint64_t size = 0;  // of the shard in it
  uint64_t backed = 0;  // bytes from map on that the kernel has backed (Back; or left to fault in, before Linux 5.14)
  bool busy = false;
  // The epoch whose shard it holds.  An epoch left before its end (a loop
  // that breaks, an error) never releases the shards it had: once no reader
  // and no fetcher holds that epoch, its buffer is free again.
  std::weak_ptr<const void> owner;
  bool Free() const { return !busy || owner.expired(); }
  StreamBuffer() = default;
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer();
};

struct StreamBufferSizing {
  uint64_t largest_shard = 0;
  uint32_t stream_buffers = 0;  // asked for; 0: chosen (Configure)
  uint32_t window = 1;          // shuffle_window: shards the readers hold at once
  uint32_t fetchers = 1;
  // Huge pages for shards of 2 MiB and up: the dataset's default is
  // !HostReclaimsFreeMemory() (core/host_memory.h).
  bool huge_pages = true;
};

class StreamBufferPool {
 public:
  // Decides how many buffers and how large.  Default count: what is in
  // use at once, two windows (at a window's end the readers finish it
  // while they start the next, whose every shard the first batch of it
  // needs) and one per fetcher in flight; but no more than a quarter of
  // the memory this process may use, and never fewer than a window and one
  // more.  Each buffer is new memory the kernel zeroes at its first touch
  // (docs/benchmarks.md: 10 of them for the defaults, where the count was
  // 12; with one window and the fetchers only, the readers at a window's
  // end found the buffers they needed held by prefetches).  Where some
  // shards are sure to stream (`needed`), more than half that memory is
  // ResourceExhausted here, not the OOM killer in the middle of an epoch.
  // `what` names the dataset.
  Status Configure(const StreamBufferSizing& sizing, bool needed, const std::string& what);

  // The fetchers now running (FetcherScaling started or retired one): a
  // count chosen by Configure follows them, within the same memory bound;
  // buffers past a lower count are unmapped as they come back.
  void SetFetchers(uint32_t fetchers);

  // One more buffer, not mapped yet (Back maps it); Configure checked
  // that the pool fits the memory.
  Status Add();

  // Maps b if it is new, and backs its first `bytes` with memory, in one
  // MADV_POPULATE_WRITE for the pages not backed before: the kernel zeroes
  // and maps them at about twice the rate of the page faults a download
  // into untouched memory takes one page at a time (docs/benchmarks.md).
  // The fetcher calls it as its receive reaches the pages (a few MiB
  // ahead), and there is nothing to do on a buffer reused for a shard no
  // larger.  Called by the fetcher that holds b, without the
  // dataset's mutex: it touches b alone.  The mapping is made here, not in
  // Add (under that mutex): mmap waits for the process's mmap lock, which
  // another fetcher's populate holds for reading for the whole call (16-40
  // ms for 64 MiB here), and the readers waited for the mutex meanwhile.
  // An error: the machine (or its cgroup) has no memory for them.
  Status Back(StreamBuffer* b, uint64_t bytes) const;

  // A free buffer for `owner`'s shard, or null.  A speculative fetch
  // leaves `reserve` buffers free (for the shards the readers will ask for
  // first: the dataset knows its order).  A shard a
  // reader waits for always gets one: `take_back` gives up a prefetched
  // shard's buffer (or null), and where the readers hold every buffer one
  // more is made, unmapped again when it comes back (Return).  An error:
  // that buffer could not be made.
  Result<StreamBuffer*> Acquire(std::weak_ptr<const void> owner, bool speculative, size_t reserve,
                                const std::function<StreamBuffer*()>& take_back);
  // A buffer back to the pool; one made past the count is unmapped.
  void Return(StreamBuffer* b);

  size_t count() const { return count_; }  // buffers the pool keeps
  size_t made() const { return buffers_.size(); }
  uint64_t capacity() const { return capacity_; }  // bytes of each
  bool huge_pages() const { return huge_pages_; }   // whether the buffers take huge pages
  uint64_t bytes() const;                          // held now

 private:
  size_t ChosenCount() const;  // Configure's default count for sizing_
  uint64_t page_bytes() const { return huge_pages_ ? (2 << 20) : 4096; }  // the buffers' page
  std::string what_;
  StreamBufferSizing sizing_;
  size_t count_ = 0;
  uint64_t capacity_ = 0;
  bool huge_pages_ = false;
  uint64_t limit_ = 0;  // the memory this process may use (0: unknown)
  std::vector<std::unique_ptr<StreamBuffer>> buffers_;
};

}  // namespace stoker

#endif  // STOKER_STREAMING_STREAM_BUFFER_POOL_H_
