#include "loader/native_batch.h"

#include "shm/arena.h"

namespace stoker {

NativeBatchLayout::NativeBatchLayout(const std::vector<FieldSpec>& fields, uint64_t n, bool batched) {
  const bool dict = !(fields.size() == 1 && fields[0].name.empty());
  std::vector<size_t> patch;  // tree positions of each leaf's offset
  if (dict) {
    tree_.PutTag(Tag::kDict);
    tree_.Put<uint32_t>(static_cast<uint32_t>(fields.size()));
  }
  for (const FieldSpec& f : fields) {
    if (dict) {
      tree_.PutTag(Tag::kStr);
      tree_.Put<uint32_t>(static_cast<uint32_t>(f.name.size()));
      tree_.PutBytes(f.name.data(), f.name.size());
    }
    tree_.PutTag(Tag::kTensor);
    tree_.Put<uint8_t>(static_cast<uint8_t>(f.dtype));
    tree_.Put<uint8_t>(static_cast<uint8_t>(f.shape.size() + (batched ? 1 : 0)));
    if (batched) tree_.Put<int64_t>(static_cast<int64_t>(n));
    for (int64_t d : f.shape) tree_.Put<int64_t>(d);
    patch.push_back(tree_.size());
    tree_.Put<uint64_t>(0);  // offset, patched below
    tree_.Put<uint64_t>(n * f.bytes());
    sample_bytes_.push_back(f.bytes());
  }
  uint64_t at = AlignUp(sizeof(BatchHeader) + tree_.size(), kLeafAlign);
  for (size_t i = 0; i < fields.size(); ++i) {
    offsets_.push_back(at);
    tree_.Patch64(patch[i], at);
    at = AlignUp(at + n * sample_bytes_[i], kLeafAlign);
  }
  total_ = at;
}

void NativeBatchLayout::WriteHeader(uint8_t* region) const {
  BatchHeader h{kBatchMagic, kBatchVersion, sizeof(BatchHeader), tree_.size(), total_};
  std::memcpy(region, &h, sizeof h);
  std::memcpy(region + sizeof h, tree_.bytes().data(), tree_.size());
}

}  // namespace stoker
