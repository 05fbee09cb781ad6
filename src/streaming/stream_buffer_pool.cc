// StreamBufferPool (stream_buffer_pool.h).
#include "streaming/stream_buffer_pool.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "proc/proc_memory.h"
#include "shm/arena.h"  // (AlignUp)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // (Linux 5.14; older headers)
#endif

namespace stoker {

StreamBuffer::~StreamBuffer() {
  if (map) munmap(map, capacity);
}

Status StreamBufferPool::Configure(const StreamBufferSizing& sizing, bool needed, const std::string& what) {
  what_ = what;
  sizing_ = sizing;
  // Whole huge pages for shards of one or more, whole pages below that.
  huge_pages_ = sizing.huge_pages && sizing.largest_shard >= (2 << 20);
  capacity_ = std::max(page_bytes(), AlignUp(sizing.largest_shard, page_bytes()));
  const Result<uint64_t> limit = MemoryLimitBytes();
  limit_ = limit.ok() ? limit.value() : 0;
  count_ = sizing.stream_buffers ? sizing.stream_buffers : ChosenCount();
  if (needed && limit_ && count_ * capacity_ > limit_ / 2)
    return Status::ResourceExhausted(
        what + " streams the shards its cache has no room for through memory: " + std::to_string(count_) +
        " buffers (stream_buffers" + (sizing.stream_buffers ? "" : ", at least shuffle_window + 1") + ") of " +
        std::to_string(capacity_) + " bytes (the largest shard) would take " + std::to_string(count_ * capacity_) +
        " bytes, more than half of the " + std::to_string(limit_) +
        " bytes this process may use (MemTotal or its cgroup's limit); lower " +
        (sizing.stream_buffers ? "stream_buffers or " : "") +
        "shuffle_window, give the cache room on disk (max_bytes), or use smaller shards");
  // The buffers are made later, as the fetchers need them: a pool that
  // cannot fit the address space this process may still map (ulimit -v) is
  // an error now too.
  rlimit as{};
  if (needed && getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    unsigned long long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "re")) {
      if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const uint64_t mapped = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t left = as.rlim_cur > mapped ? as.rlim_cur - mapped : 0;
    if (count_ * capacity_ > left)
      return Status::ResourceExhausted(
          what + " streams the shards its cache has no room for through memory: " + std::to_string(count_) +
          " buffers (stream_buffers) of " + std::to_string(capacity_) + " bytes would take " +
          std::to_string(count_ * capacity_) + " bytes of address space, and this process may map only " +
          std::to_string(left) + " more (RLIMIT_AS, ulimit -v); lower stream_buffers or shuffle_window, or give "
          "the cache room on disk (max_bytes)");
  }
  return Status::OK();
}

size_t StreamBufferPool::ChosenCount() const {
  const size_t least = size_t{sizing_.window} + 1;
  const size_t n = 2 * size_t{sizing_.window} + size_t{sizing_.fetchers};
  return limit_ ? std::max(least, std::min<size_t>(n, limit_ / 4 / capacity_)) : n;
}

void StreamBufferPool::SetFetchers(uint32_t fetchers) {
  sizing_.fetchers = fetchers;
  if (!sizing_.stream_buffers && capacity_) count_ = ChosenCount();
}

Status StreamBufferPool::Add() {
  auto b = std::make_unique<StreamBuffer>();
  b->capacity = capacity_;  // (mapped by the fetcher that fills it first: Back)
  buffers_.push_back(std::move(b));
  return Status::OK();
}

Status StreamBufferPool::Back(StreamBuffer* b, uint64_t bytes) const {
  if (!b->map) {
    void* p = mmap(nullptr, b->capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return Status::ResourceExhausted(what_ + ": no memory for a stream buffer of " + std::to_string(b->capacity) +
                                       " bytes (" + std::to_string(count_) +
                                       " of them: stream_buffers; lower it or shuffle_window)");
    // (advice: fine where the kernel has no huge pages; NOHUGEPAGE also
    // where its default is "always")
    madvise(p, b->capacity, huge_pages_ ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    b->map = static_cast<uint8_t*>(p);
  }
  const uint64_t want = std::min(b->capacity, AlignUp(bytes, page_bytes()));
  if (want <= b->backed) return Status::OK();
  if (madvise(b->map + b->backed, want - b->backed, MADV_POPULATE_WRITE) != 0) {
    if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON)
      return Status::ResourceExhausted(
          what_ + ": no memory for a stream buffer's " + std::to_string(want - b->backed) +
          " bytes (the machine or this process's cgroup is out of memory); lower stream_buffers or "
          "shuffle_window, or give the cache room on disk (max_bytes)");
  }  // (else EINVAL before Linux 5.14: the pages fault in as the shard arrives)
  b->backed = want;
  return Status::OK();
}

// Readers that each work through a different part of the order (batches of
// many small shards: a batch of 100 samples of 2-sample shards spans 12
// windows of 4) can need more shards at once than there are buffers;
// waiting for a release then waited forever, the fetchers' prefetches
// holding the buffers the readers' shards needed: hence `take_back`.
Result<StreamBuffer*> StreamBufferPool::Acquire(std::weak_ptr<const void> owner, bool speculative, size_t reserve,
                                                const std::function<StreamBuffer*()>& take_back) {
  size_t free = count_ - std::min(count_, buffers_.size());
  for (const auto& b : buffers_) free += b->Free();
  if (speculative && free <= reserve) return static_cast<StreamBuffer*>(nullptr);
  StreamBuffer* got = nullptr;
  if (free > 0) {
    for (auto& b : buffers_)
      if (b->Free()) {
        got = b.get();
        break;
      }
  } else {
    got = take_back();
  }
  if (!got) {
    STOKER_RETURN_IF_ERROR(Add());
    got = buffers_.back().get();
  }
  got->busy = true;
  got->owner = std::move(owner);
  return got;
}

void StreamBufferPool::Return(StreamBuffer* b) {
  b->busy = false;
  b->owner.reset();
  if (buffers_.size() <= count_) return;
  auto it = std::find_if(buffers_.begin(), buffers_.end(), [&](const auto& x) { return x.get() == b; });
  if (it != buffers_.end()) buffers_.erase(it);
}

uint64_t StreamBufferPool::bytes() const {
  uint64_t n = 0;
  for (const auto& b : buffers_) n += b->capacity;
  return n;
}

}  // namespace stoker
