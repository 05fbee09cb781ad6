#include "shared/string_list.h"

#include <cstring>

namespace stoker {

Result<std::shared_ptr<SharedBlock>> StringListBuilder::Build(const std::string& name) {
  StringListHeader h{};
  h.magic = kStringListMagic;
  h.count = size();
  h.offsets_at = sizeof(StringListHeader);
  h.bytes_at = h.offsets_at + offsets_.size() * sizeof(uint64_t);
  h.bytes_len = bytes_.size();
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<SharedBlock> block, SharedBlock::Create(h.bytes_at + h.bytes_len, name));
  std::memcpy(block->data(), &h, sizeof h);
  std::memcpy(block->data() + h.offsets_at, offsets_.data(), offsets_.size() * sizeof(uint64_t));
  if (!bytes_.empty()) std::memcpy(block->data() + h.bytes_at, bytes_.data(), bytes_.size());
  STOKER_RETURN_IF_ERROR(block->Seal());
  return block;
}

Result<StringListView> StringListView::Open(std::shared_ptr<SharedBlock> block) {
  if (!block->sealed()) return Status::InvalidArgument("a StringList block must be sealed (read-only)");
  StringListHeader h;
  if (block->size() < sizeof h) return Status::InvalidArgument("shared block too small for a StringList");
  std::memcpy(&h, block->data(), sizeof h);
  const uint64_t n = block->size();
  if (h.magic != kStringListMagic) return Status::InvalidArgument("shared block is not a StringList (bad magic)");
  if (h.offsets_at != sizeof h || h.count > (n - h.offsets_at) / sizeof(uint64_t) - 1 ||
      h.bytes_at != h.offsets_at + (h.count + 1) * sizeof(uint64_t) || h.bytes_at > n || h.bytes_len > n - h.bytes_at)
    return Status::InvalidArgument("StringList header out of bounds (corrupt block)");
  StringListView v;
  v.offsets_ = reinterpret_cast<const uint64_t*>(block->data() + h.offsets_at);
  v.bytes_ = reinterpret_cast<const char*>(block->data() + h.bytes_at);
  v.count_ = h.count;
  // Offsets must be monotonic and within the bytes: checked once here so
  // operator[] needs no checks.  The block is sealed, so they cannot change.
  if (v.offsets_[0] != 0 || v.offsets_[h.count] != h.bytes_len)
    return Status::InvalidArgument("StringList offsets out of bounds (corrupt block)");
  for (uint64_t i = 0; i < h.count; ++i)
    if (v.offsets_[i] > v.offsets_[i + 1]) return Status::InvalidArgument("StringList offsets not monotonic");
  v.block_ = std::move(block);
  return v;
}

}  // namespace stoker
