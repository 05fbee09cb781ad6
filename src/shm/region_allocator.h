// RegionAllocator: hands out byte ranges of the arena's region heap under a
// byte budget.  Main-process only; not thread-safe (the Engine locks).
//
// Budget accounting counts *resident* bytes: bytes handed out plus free
// bytes whose pages are still backed.  Free ranges keep their pages (they are
// pre-faulted and warm) until the budget needs them, when Discard() returns
// their pages to the kernel.  A free range is therefore either "warm" or
// "discarded"; neighbours of the same kind are merged.
#ifndef STOKER_SHM_REGION_ALLOCATOR_H_
#define STOKER_SHM_REGION_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace stoker {

class RegionAllocator {
 public:
  // Manages [begin, end); resident bytes never exceed `limit`.
  RegionAllocator(uint64_t begin, uint64_t end, uint64_t limit);

  // Returns the offset of `size` bytes (a multiple of 4096), or nullopt when
  // they do not fit within the limit (or the range).
  std::optional<uint64_t> Allocate(uint64_t size);
  void Free(uint64_t offset, uint64_t size);
  // Marks every warm free range discarded and returns them, so the caller can
  // release their pages (Arena::Discard).  Resident bytes drop accordingly.
  std::vector<std::pair<uint64_t, uint64_t>> DiscardFree();

  // End of the highest range in use or warm (the arena must be this big).
  uint64_t top() const { return top_; }
  uint64_t in_use() const { return in_use_; }
  uint64_t resident() const { return resident_; }
  uint64_t limit() const { return limit_; }
  uint64_t warm_free() const { return warm_free_; }

 private:
  struct Range {
    uint64_t size;
    bool warm;
  };
  std::optional<uint64_t> TakeFrom(bool warm, uint64_t size);
  void Insert(uint64_t off, uint64_t size, bool warm);

  uint64_t begin_, end_, limit_;
  uint64_t top_;
  uint64_t in_use_ = 0;
  uint64_t resident_ = 0;
  uint64_t warm_free_ = 0;
  std::map<uint64_t, Range> free_;  // offset -> range below top_
};

}  // namespace stoker

#endif  // STOKER_SHM_REGION_ALLOCATOR_H_
