// StringList: an immutable list of strings in one sealed SharedBlock, for
// the per-sample metadata datasets keep (file paths, labels as text).
//
// A Python list of str in a forked worker is copied page by page as the
// worker reads it (reading an object writes its reference count:
// "copy-on-read").  A StringList's contents are plain bytes in shared pages
// that readers only map: every process shares one copy, however long it runs.
//
// Layout (all little-endian u64; the block is sealed read-only):
//   StringListHeader
//   u64 offsets[count + 1]   string i is bytes[offsets[i], offsets[i+1])
//   bytes                    UTF-8, not terminated
#ifndef STOKER_SHARED_STRING_LIST_H_
#define STOKER_SHARED_STRING_LIST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/shared_block.h"
#include "stoker/status.h"

namespace stoker {

struct StringListHeader {
  uint64_t magic;         // kStringListMagic
  uint64_t count;
  uint64_t offsets_at;    // byte offset of offsets[] in the block
  uint64_t bytes_at;      // byte offset of the string bytes
  uint64_t bytes_len;
};
inline constexpr uint64_t kStringListMagic = 0x3154534C52545353ull;  // "SSTRLST1"

// Collects strings, then writes them into a sealed block.
class StringListBuilder {
 public:
  void Add(std::string_view s) {
    bytes_.append(s.data(), s.size());
    offsets_.push_back(bytes_.size());
  }
  uint64_t size() const { return offsets_.size() - 1; }
  Result<std::shared_ptr<SharedBlock>> Build(const std::string& name);

 private:
  std::vector<uint64_t> offsets_{0};
  std::string bytes_;
};

// Reads a StringList block.  Cheap to copy; holds the block alive.
class StringListView {
 public:
  // Checks the header and bounds; InvalidArgument for anything else.
  static Result<StringListView> Open(std::shared_ptr<SharedBlock> block);

  uint64_t size() const { return count_; }
  // REQUIRES: i < size().
  std::string_view operator[](uint64_t i) const {
    return std::string_view(bytes_ + offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  const SharedBlock& block() const { return *block_; }
  const std::shared_ptr<SharedBlock>& shared_block() const { return block_; }

 private:
  std::shared_ptr<SharedBlock> block_;
  const uint64_t* offsets_ = nullptr;
  const char* bytes_ = nullptr;
  uint64_t count_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SHARED_STRING_LIST_H_
