// PageCache: decoded data pages of a ParquetDataset (a global shuffle's,
// parquet/page_decoder.h) under a byte budget, least recently used first
// out.  A page missing is decoded by the reader that needs it, outside the
// lock; two readers that need the same missing page both decode it and the
// first keeps it (pages are small: a few rows' worth of a column).
#ifndef STOKER_PARQUET_PAGE_CACHE_H_
#define STOKER_PARQUET_PAGE_CACHE_H_

#include <arrow/api.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "stoker/status.h"

namespace stoker {

class PageCache {
 public:
  using Page = std::shared_ptr<arrow::Array>;
  explicit PageCache(uint64_t budget) : budget_(budget) {}
  // The page of `key` (any 64-bit identity), decoded by `decode` if missing.
  Result<Page> Get(uint64_t key, const std::function<Result<Page>()>& decode);
  void SetBudget(uint64_t budget);
  void Clear();
  uint64_t decoded() const;   // pages decoded (again after an eviction, counted again)
  uint64_t held_bytes() const;

 private:
  struct Entry {
    Page page;
    uint64_t bytes;
    std::list<uint64_t>::iterator at;  // its place in lru_
  };
  void EvictLocked();
  mutable std::mutex mu_;
  uint64_t budget_, held_ = 0, decoded_ = 0;
  std::list<uint64_t> lru_;  // most recently used first
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace stoker

#endif  // STOKER_PARQUET_PAGE_CACHE_H_
