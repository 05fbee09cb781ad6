// DecodePool: the Arrow memory pool a ParquetDataset decodes row groups
// into.  It keeps the large blocks (kMinKept and more) that decodes free,
// up to a byte limit of its own, and gives them to the next decodes.
//
// Why: Arrow's default pool (mimalloc) hands freed memory back to the
// system after a second, and the kernel zeroes every page it gives again.
// A shuffled epoch holds a window of row groups (32 of them, over 1 GB at
// issue 51's size) for about a second and drops them one by one as the
// next window is decoded: its decodes landed in fresh pages, whose zeroing
// was 10% of a shuffled epoch's CPU time, 2-3 times the sequential scan's
// (docs/benchmarks.md).  A row group dropped frees about what the next
// decode needs, and row groups decoded in chunks of kChunkRows rows have
// buffers of a few sizes, so a limit of a row group or two is enough.
//
// The blocks kept are the pool's own memory, beside the cache's budget of
// decoded row groups: ParquetDataset counts both in what it holds of a
// loader's max_memory.
//
// A large block's size is its request rounded up to a size class (eight
// classes per power of two: at most 1/8 more than asked), so that a block
// freed by one decode fits a request of about its size, and a
// reallocation within its class keeps its block.  Smaller requests, and
// those aligned past Arrow's 64 bytes, go to the default pool as they are.
//
// Buffers decoded into the pool may outlive whoever made it: Close() (not
// delete) frees the kept blocks, and the pool goes with the last block.
#ifndef STOKER_PARQUET_DECODE_POOL_H_
#define STOKER_PARQUET_DECODE_POOL_H_

#include <arrow/memory_pool.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace stoker {

class DecodePool final : public arrow::MemoryPool {
 public:
  static constexpr int64_t kMinKept = int64_t{64} << 10;
  static constexpr int64_t kAlignment = 64;

  // A pool that keeps at most `keep` bytes of freed blocks.
  explicit DecodePool(uint64_t keep, arrow::MemoryPool* under = arrow::default_memory_pool());
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;
  // Frees the kept blocks; the pool is deleted now, or when the last block
  // in use is freed.  (Not `delete`: buffers may still point here.)
  void Close();
  void SetKeep(uint64_t keep);  // (kept blocks past it are freed)
  uint64_t keep() const;

  // The size class of a request of n bytes (n when under kMinKept).
  static int64_t ClassOf(int64_t n);

  using arrow::MemoryPool::Allocate;
  using arrow::MemoryPool::Free;
  using arrow::MemoryPool::Reallocate;
  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override;
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment, uint8_t** ptr) override;
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override;
  void ReleaseUnused() override;  // (the kept blocks go back to the default pool)
  int64_t bytes_allocated() const override;
  int64_t max_memory() const override;
  int64_t total_bytes_allocated() const override;
  int64_t num_allocations() const override;
  std::string backend_name() const override;

  struct Stats {
    uint64_t kept = 0;    // bytes of the freed blocks kept for the next decodes
    uint64_t reused = 0;  // large allocations given a kept block
    uint64_t fresh = 0;   // large allocations the default pool made
  };
  Stats stats() const;

 private:
  ~DecodePool() override;
  static bool Pooled(int64_t size, int64_t alignment) { return size >= kMinKept && alignment <= kAlignment; }
  void TrimLocked();  // kept blocks past keep_ go, the largest first
  // The counters of an allocation (old_size 0, a new block) or a growth in place.
  void CountLocked(int64_t old_size, int64_t new_size, bool new_block);

  arrow::MemoryPool* const under_;
  mutable std::mutex mu_;
  std::map<int64_t, std::vector<uint8_t*>> kept_;  // by class
  uint64_t keep_;
  Stats s_;
  bool closed_ = false;
  uint64_t blocks_in_use_ = 0;  // (small ones too: the pool goes when none is left after Close)
  int64_t bytes_ = 0, max_bytes_ = 0, total_bytes_ = 0, allocations_ = 0;
};

}  // namespace stoker

#endif  // STOKER_PARQUET_DECODE_POOL_H_
