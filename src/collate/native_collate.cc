#include "collate/native_collate.h"

#include <algorithm>
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
  index_.assign(nf, 0);
  row_.assign(nf, 0);
  for (size_t f = 0; f < nf; ++f) {
    if (Joined(f)) {
      // Read in place: end to end (values + offsets), or a row each of the
      // longest sample's bytes (padded); the offsets or lengths after them.
      const bool padded = fields_[f].layout == FieldLayout::kPadded;
      for (uint64_t i = 0; i < n && padded; ++i) row_[f] = std::max(row_[f], sample_bytes_[i * nf + f]);
      offsets_[f] = at;
      for (uint64_t i = 0; i < n; ++i) {
        var_offsets_[f].push_back(at);
        at += padded ? row_[f] : sample_bytes_[i * nf + f];
      }
      index_[f] = at = AlignUp(at, kLeafAlign);
      at = AlignUp(at + (padded ? n : n + 1) * sizeof(int64_t), kLeafAlign);
    } else if (fields_[f].variable) {
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
  auto key = [&](const std::string& name) {
    tree->PutTag(Tag::kStr);
    tree->Put<uint32_t>(static_cast<uint32_t>(name.size()));
    tree->PutBytes(name.data(), name.size());
  };
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
    if (dict_) key(fs.name);
    const uint64_t off = offsets_.empty() ? 0 : offsets_[f];
    if (!fs.variable) {
      leaf(fs.dtype, batched_, k, fs.shape, off, k * fs.bytes());
      continue;
    }
    const uint32_t es = ElementSize(fs.dtype);
    const uint64_t at = index_.empty() ? 0 : index_[f];
    if (Joined(f) && fs.layout == FieldLayout::kOffsets) {
      uint64_t bytes = 0;
      for (uint64_t j = 0; j < k; ++j) bytes += sample_bytes_[pos(j) * nf + f];
      tree->PutTag(Tag::kDict);
      tree->Put<uint32_t>(2);
      key("values");
      leaf(fs.dtype, true, bytes / es, {}, off, bytes);
      key("offsets");
      leaf(ElementType::kInt64, true, k + 1, {}, at, (k + 1) * sizeof(int64_t));
      continue;
    }
    if (Joined(f)) {  // padded
      const uint64_t row = row_.empty() ? 0 : row_[f];
      tree->PutTag(Tag::kDict);
      tree->Put<uint32_t>(2);
      key("values");
      leaf(fs.dtype, true, k, {static_cast<int64_t>(row / es)}, off, k * row);
      key("lengths");
      leaf(ElementType::kInt64, true, k, {}, at, k * sizeof(int64_t));
      continue;
    }
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
  for (size_t f = 0; f < fields_.size(); ++f)
    if (Joined(f)) Join(region, f, kept);
  TreeWriter tree;
  BuildTree(&tree, kept);
  BatchHeader h{kBatchMagic, kBatchVersion, sizeof(BatchHeader), tree.size(), total_};
  std::memcpy(region, &h, sizeof h);
  std::memcpy(region + sizeof h, tree.bytes().data(), tree.size());
}

void NativeCollate::Join(uint8_t* region, size_t f, const std::vector<uint64_t>* kept) const {
  const size_t nf = fields_.size();
  const uint64_t k = kept ? kept->size() : n_;
  const uint64_t es = ElementSize(fields_[f].dtype);
  int64_t* index = reinterpret_cast<int64_t*>(region + index_[f]);  // (kLeafAlign-aligned)
  uint8_t* to = region + offsets_[f];
  if (fields_[f].layout == FieldLayout::kOffsets) {
    index[0] = 0;
    for (uint64_t j = 0; j < k; ++j) {
      const uint64_t i = kept ? (*kept)[j] : j, b = sample_bytes_[i * nf + f];
      const uint8_t* from = region + var_offsets_[f][i];
      if (from != to) std::memmove(to, from, b);  // (a sample left out: the rest move down)
      to += b;
      index[j + 1] = index[j] + static_cast<int64_t>(b / es);
    }
    return;
  }
  const uint64_t row = row_[f];
  for (uint64_t j = 0; j < k; ++j, to += row) {
    const uint64_t i = kept ? (*kept)[j] : j, b = sample_bytes_[i * nf + f];
    const uint8_t* from = region + var_offsets_[f][i];
    if (from != to) std::memmove(to, from, b);
    std::memset(to + b, 0, row - b);  // (the slot's memory holds earlier batches)
    index[j] = static_cast<int64_t>(b / es);
  }
}

}  // namespace stoker
