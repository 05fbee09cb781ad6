#include "collate/native_collate.h"

#include <cstring>

#include "shm/arena.h"

namespace stoker {

NativeCollate::NativeCollate(const std::vector<FieldSpec>& fields, uint64_t n, bool batched,
                                     const std::vector<uint64_t>* sample_bytes, SampleStructure structure)
    : fields_(fields),
      n_(n),
      batched_(batched),
      dict_(structure == SampleStructure::kDict && !(fields.size() == 1 && fields[0].name.empty())),
      tuple_(structure == SampleStructure::kTuple) {
  const size_t nf = fields_.size();
  sample_bytes_.resize(n * nf);
  for (uint64_t i = 0; i < n; ++i)
    for (size_t f = 0; f < nf; ++f)
      sample_bytes_[i * nf + f] = fields_[f].variable && sample_bytes ? (*sample_bytes)[i * nf + f] : fields_[f].bytes();
  // The tree of all n samples is the largest; leaves go after it.
  TreeWriter tree;
  BuildTree(&tree, nullptr);
  uint64_t at = AlignUp(sizeof(BatchHeader) + tree.size(), kLeafAlign);
  offsets_.assign(nf, 0);
  var_offsets_.resize(nf);
  for (size_t f = 0; f < nf; ++f) {
    if (fields_[f].variable) {
      for (uint64_t i = 0; i < n; ++i) {
        var_offsets_[f].push_back(at);
        at = AlignUp(at + sample_bytes_[i * nf + f], kLeafAlign);
      }
    } else {
      offsets_[f] = at;
      at = AlignUp(at + n * fields_[f].bytes(), kLeafAlign);
    }
  }
  total_ = at;
}

void NativeCollate::BuildTree(TreeWriter* tree, const std::vector<uint64_t>* kept) const {
  const size_t nf = fields_.size();
  const uint64_t k = kept ? kept->size() : n_;
  auto pos = [&](uint64_t j) { return kept ? (*kept)[j] : j; };
  auto leaf = [&](ElementType dtype, bool lead, uint64_t lead_n, const std::vector<int64_t>& shape, uint64_t offset,
                  uint64_t nbytes) {
    tree->PutTag(Tag::kTensor);
    tree->Put<uint8_t>(static_cast<uint8_t>(dtype));
    tree->Put<uint8_t>(static_cast<uint8_t>(shape.size() + (lead ? 1 : 0)));
    if (lead) tree->Put<int64_t>(static_cast<int64_t>(lead_n));
    for (int64_t d : shape) tree->Put<int64_t>(d);
    tree->Put<uint64_t>(offset);
    tree->Put<uint64_t>(nbytes);
  };
  if (dict_) {
    tree->PutTag(Tag::kDict);
    tree->Put<uint32_t>(static_cast<uint32_t>(nf));
  } else if (tuple_) {
    tree->PutTag(batched_ ? Tag::kList : Tag::kTuple);
    tree->Put<uint32_t>(static_cast<uint32_t>(nf));
  }
  for (size_t f = 0; f < nf; ++f) {
    const FieldSpec& fs = fields_[f];
    if (dict_) {
      tree->PutTag(Tag::kStr);
      tree->Put<uint32_t>(static_cast<uint32_t>(fs.name.size()));
      tree->PutBytes(fs.name.data(), fs.name.size());
    }
    const uint64_t off = offsets_.empty() ? 0 : offsets_[f];
    if (!fs.variable) {
      leaf(fs.dtype, batched_, k, fs.shape, off, k * fs.bytes());
      continue;
    }
    const uint32_t es = ElementSize(fs.dtype);
    auto one = [&](uint64_t i) {
      const uint64_t b = sample_bytes_[i * nf + f];
      const uint64_t at = var_offsets_.empty() || var_offsets_[f].empty() ? 0 : var_offsets_[f][i];
      if (fs.leaf == FieldLeaf::kTensor) return leaf(fs.dtype, true, b / es, {}, at, b);
      tree->PutTag(fs.leaf == FieldLeaf::kStr ? Tag::kStrAt : Tag::kBytesAt);
      tree->Put<uint64_t>(at);
      tree->Put<uint64_t>(b);
    };
    if (!batched_) {
      one(0);
      continue;
    }
    tree->PutTag(Tag::kList);
    tree->Put<uint32_t>(static_cast<uint32_t>(k));
    for (uint64_t j = 0; j < k; ++j) one(pos(j));
  }
}

void NativeCollate::WriteHeader(uint8_t* region, const std::vector<uint64_t>* kept) const {
  if (kept) {
    for (size_t f = 0; f < fields_.size(); ++f) {
      if (fields_[f].variable) continue;
      const uint64_t sb = fields_[f].bytes();
      for (uint64_t j = 0; j < kept->size(); ++j)
        if ((*kept)[j] != j) std::memmove(region + offsets_[f] + j * sb, region + offsets_[f] + (*kept)[j] * sb, sb);
    }
  }
  TreeWriter tree;
  BuildTree(&tree, kept);
  BatchHeader h{kBatchMagic, kBatchVersion, sizeof(BatchHeader), tree.size(), total_};
  std::memcpy(region, &h, sizeof h);
  std::memcpy(region + sizeof h, tree.bytes().data(), tree.size());
}

}  // namespace stoker
