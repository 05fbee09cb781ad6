// MixedDataset (mixed_dataset.h).
#include "io/mixed_dataset.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace stoker {

namespace {

bool SameFields(const std::vector<FieldSpec>& a, const std::vector<FieldSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t f = 0; f < a.size(); ++f)
    if (a[f].name != b[f].name || a[f].dtype != b[f].dtype || a[f].shape != b[f].shape ||
        a[f].variable != b[f].variable || a[f].leaf != b[f].leaf || a[f].layout != b[f].layout)
      return false;
  return true;
}

}  // namespace

Result<std::shared_ptr<MixedDataset>> MixedDataset::Make(std::vector<std::shared_ptr<NativeDataset>> sources) {
  if (sources.empty()) return Status::InvalidArgument("Mix: no sources");
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!sources[i]) return Status::InvalidArgument("Mix: source " + std::to_string(i) + " is not a dataset");
    if (!SameFields(sources[i]->fields(), sources[0]->fields()) || sources[i]->structure() != sources[0]->structure())
      return Status::InvalidArgument("Mix: source " + std::to_string(i) + " (" + sources[i]->Describe() +
                                     ") has other fields than source 0 (" + sources[0]->Describe() +
                                     "): the samples of a mix read by C++ threads must have the same fields");
    if (sources[i]->on_error() != sources[0]->on_error())
      return Status::InvalidArgument("Mix: source " + std::to_string(i) + " and source 0 differ in on_error");
  }
  auto d = std::shared_ptr<MixedDataset>(new MixedDataset(std::move(sources)));
  d->set_on_error(d->sources_[0]->on_error());
  return d;
}

MixedDataset::MixedDataset(std::vector<std::shared_ptr<NativeDataset>> sources) : sources_(std::move(sources)) {
  offsets_.assign(1, 0);
  for (const auto& s : sources_) offsets_.push_back(offsets_.back() + s->size());
  // About four buckets per source, each a power of two of indices.
  const uint64_t total = std::max<uint64_t>(1, offsets_.back());
  while (shift_ < 63 && (total >> shift_) > 4 * sources_.size()) ++shift_;
  bucket_.resize((total >> shift_) + 1);
  size_t i = 0;
  for (size_t b = 0; b < bucket_.size(); ++b) {
    const uint64_t first = static_cast<uint64_t>(b) << shift_;
    while (i + 1 < sources_.size() && offsets_[i + 1] <= first) ++i;
    bucket_[b] = static_cast<uint32_t>(i);
  }
}

std::pair<size_t, uint64_t> MixedDataset::Locate(uint64_t index) const {
  size_t i = bucket_[index >> shift_];
  while (offsets_[i + 1] <= index) ++i;  // (index < size(): source i + 1 exists while this holds)
  return {i, index - offsets_[i]};
}

Status MixedDataset::Read(uint64_t index, uint8_t* const* dst) {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no sample " + std::to_string(index));
  const auto [i, j] = Locate(index);
  return sources_[i]->Read(j, dst);
}

Status MixedDataset::ReadBatch(const uint64_t* indices, uint64_t n, uint8_t* const* dsts) {
  const size_t nf = fields().size();
  // The batch's samples linked per source, in batch order (no sort): a
  // source's samples go to it together, a lone one by Read.
  struct Scratch {
    std::vector<int64_t> head, tail, next;  // per source, per source, per sample (-1: none)
    std::vector<uint32_t> seen;             // the sources met, in order
    std::vector<uint64_t> local;
    std::vector<uint8_t*> to;
  };
  // One per depth: a source may be a mix itself, read from inside this call.
  thread_local std::vector<std::unique_ptr<Scratch>> pool;
  thread_local size_t depth = 0;
  if (pool.size() <= depth) pool.push_back(std::make_unique<Scratch>());
  Scratch& sc = *pool[depth];
  struct Enter {
    size_t& d;
    explicit Enter(size_t& x) : d(x) { ++d; }
    ~Enter() { --d; }
  } enter(depth);
  if (sc.head.size() != sources_.size()) {
    sc.head.assign(sources_.size(), -1);
    sc.tail.assign(sources_.size(), -1);
  }
  sc.next.assign(n, -1);
  sc.seen.clear();
  Status st;
  for (uint64_t k = 0; k < n; ++k) {
    if (indices[k] >= size()) {
      st = Status::InvalidArgument(Describe() + ": no sample " + std::to_string(indices[k]));
      break;
    }
    const size_t i = Locate(indices[k]).first;
    if (sc.head[i] < 0) {
      sc.head[i] = static_cast<int64_t>(k);
      sc.seen.push_back(static_cast<uint32_t>(i));
    } else {
      sc.next[static_cast<size_t>(sc.tail[i])] = static_cast<int64_t>(k);
    }
    sc.tail[i] = static_cast<int64_t>(k);
  }
  for (uint32_t i : sc.seen) {
    const int64_t first = sc.head[i];
    sc.head[i] = sc.tail[i] = -1;  // (left clean for the next batch, whatever happens)
    if (!st.ok()) continue;
    if (sc.next[static_cast<size_t>(first)] < 0) {  // one sample of this source
      st = sources_[i]->Read(indices[first] - offsets_[i], dsts + static_cast<uint64_t>(first) * nf);
      continue;
    }
    sc.local.clear();
    sc.to.clear();
    for (int64_t k = first; k >= 0; k = sc.next[static_cast<size_t>(k)]) {
      sc.local.push_back(indices[k] - offsets_[i]);
      sc.to.insert(sc.to.end(), dsts + static_cast<uint64_t>(k) * nf, dsts + static_cast<uint64_t>(k + 1) * nf);
    }
    st = sources_[i]->ReadBatch(sc.local.data(), sc.local.size(), sc.to.data());
  }
  return st;
}

Status MixedDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no sample " + std::to_string(index));
  const auto [i, j] = Locate(index);
  return sources_[i]->SampleBytes(j, bytes);
}

std::string MixedDataset::Describe() const {
  return "a mix of " + std::to_string(sources_.size()) + " sources (" + sources_[0]->Describe() +
         (sources_.size() > 1 ? ", ..." : "") + ")";
}

std::string MixedDataset::DescribeSample(uint64_t index) const {
  if (index >= size()) return "sample " + std::to_string(index) + " of " + Describe();
  const auto [i, j] = Locate(index);
  return sources_[i]->DescribeSample(j) + " (source " + std::to_string(i) + " of the mix)";
}

void MixedDataset::SetSeed(uint64_t seed) {
  for (auto& s : sources_) s->SetSeed(seed);
}

void MixedDataset::SetEpoch(uint64_t epoch) {
  NativeDataset::SetEpoch(epoch);
  for (auto& s : sources_) s->SetEpoch(epoch);
}

}  // namespace stoker
