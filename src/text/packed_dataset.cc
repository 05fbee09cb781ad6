// PackedDataset (packed_dataset.h).
#include "text/packed_dataset.h"

#include <algorithm>
#include <cstring>

namespace stoker {

Result<std::shared_ptr<PackedDataset>> PackedDataset::Make(std::vector<std::shared_ptr<TokenDataset>> sources,
                                                           const std::vector<uint64_t>& docs, PackOptions options) {
  if (sources.empty()) return Status::InvalidArgument("Pack: no token datasets");
  std::shared_ptr<PackedDataset> d(new PackedDataset());
  d->sources_ = std::move(sources);
  d->options_ = options;
  d->offsets_.assign(1, 0);
  for (const auto& s : d->sources_) d->offsets_.push_back(d->offsets_.back() + s->size());
  for (uint64_t g : docs)
    if (g >= d->offsets_.back())
      return Status::InvalidArgument("Pack: document " + std::to_string(g) + " of an order over " +
                                     std::to_string(d->offsets_.back()) + " documents");
  STOKER_ASSIGN_OR_RETURN(d->plan_, MakePackPlan(docs, [&](uint64_t g) { return d->Length(g); }, options.seq_len,
                                                 options.mode, options.window));
  const int64_t L = options.seq_len;
  d->fields_ = {FieldSpec{"input_ids", ElementType::kInt64, {L}}, FieldSpec{"labels", ElementType::kInt64, {L}},
                FieldSpec{"position_ids", ElementType::kInt64, {L}}, FieldSpec{"document_ids", ElementType::kInt64, {L}},
                FieldSpec{"cu_seqlens", ElementType::kInt32, {}, true}};
  return d;
}

std::pair<const TokenDataset*, uint64_t> PackedDataset::Locate(uint64_t doc) const {
  const auto s = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), doc) - offsets_.begin() - 1);
  return {sources_[s].get(), doc - offsets_[s]};
}

uint32_t PackedDataset::Length(uint64_t doc) const {
  const auto [source, local] = Locate(doc);
  return source->DocumentLength(local) + (options_.eos_id >= 0 ? 1 : 0);
}

Status PackedDataset::Tokens(uint64_t doc, uint64_t offset, uint64_t n, int64_t* out) const {
  const auto [source, local] = Locate(doc);
  const uint64_t real = source->DocumentLength(local);
  const uint64_t from_file = offset < real ? std::min(n, real - offset) : 0;
  if (from_file) STOKER_RETURN_IF_ERROR(source->ReadTokens(local, offset, from_file, out));
  for (uint64_t k = from_file; k < n; ++k) out[k] = options_.eos_id;  // (the appended eos)
  return Status::OK();
}

Status PackedDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no sequence " + std::to_string(index));
  for (size_t f = 0; f + 1 < fields_.size(); ++f) bytes[f] = fields_[f].bytes();
  bytes[fields_.size() - 1] = (plan_.Segments(index, options_.seq_len) + 1) * sizeof(int32_t);
  return Status::OK();
}

Status PackedDataset::Read(uint64_t index, uint8_t* const* dst) {
  if (index >= size()) return Status::InvalidArgument(Describe() + ": no sequence " + std::to_string(index));
  const PackSource source{[this](uint64_t doc) { return Length(doc); },
                          [this](uint64_t doc, uint64_t offset, uint64_t n, int64_t* out) {
                            return Tokens(doc, offset, n, out);
                          },
                          [](uint64_t doc) { return static_cast<int64_t>(doc); }};
  thread_local std::vector<int32_t> cu;
  STOKER_RETURN_IF_ERROR(FillPackedSequence(plan_, index, options_.seq_len, options_.pad_id, source,
                                            reinterpret_cast<int64_t*>(dst[0]), reinterpret_cast<int64_t*>(dst[1]),
                                            reinterpret_cast<int64_t*>(dst[2]), reinterpret_cast<int64_t*>(dst[3]),
                                            &cu));
  std::memcpy(dst[4], cu.data(), cu.size() * sizeof(int32_t));
  return Status::OK();
}

std::string PackedDataset::Describe() const {
  return std::string("packed sequences of ") + std::to_string(options_.seq_len) + " tokens (" +
         (options_.mode == PackMode::kConcat ? "concat" : "best_fit") + ", " + std::to_string(size()) +
         " sequences) of " + sources_[0]->Describe() + (sources_.size() > 1 ? " and more" : "");
}

std::string PackedDataset::DescribeSample(uint64_t index) const {
  if (index >= size()) return "sequence " + std::to_string(index) + " of " + Describe();
  const PackPiece& first = plan_.pieces[plan_.first[index]];
  const auto [source, local] = Locate(first.doc);
  return "packed sequence " + std::to_string(index) + " (from " + source->DescribeSample(local) +
         ", token " + std::to_string(first.offset) + ")";
}

}  // namespace stoker
