#include "io/tfrecord_dataset.h"

#include <algorithm>
#include <set>

namespace stoker {

Status ValidateTFRecordFeatures(const std::vector<FieldSpec>& features, const std::string& what) {
  if (features.empty())
    return Status::InvalidArgument(what + ": declare the TFRecord features to read, e.g. "
                                   "features={'x': ('float32', (1000,)), 'y': ('int64', ())}");
  std::set<std::string> names;
  for (const FieldSpec& f : features) {
    if (f.name.empty()) return Status::InvalidArgument(what + ": a feature needs a name");
    if (!names.insert(f.name).second)
      return Status::InvalidArgument(what + ": feature '" + f.name + "' is declared twice");
    STOKER_RETURN_IF_ERROR(ValidateFieldSpec(f, what + ": feature '" + f.name + "'"));
    if (f.variable) return Status::InvalidArgument(what + ": feature '" + f.name + "' needs a fixed shape");
  }
  return Status::OK();
}

Result<std::unique_ptr<TFRecordDataset>> TFRecordDataset::Open(const std::vector<std::string>& paths,
                                                               std::vector<FieldSpec> features,
                                                               TFRecordOptions options) {
  if (paths.empty()) return Status::InvalidArgument("TFRecordDataset: no files given");
  STOKER_RETURN_IF_ERROR(ValidateTFRecordFeatures(features, "TFRecordDataset"));
  STOKER_ASSIGN_OR_RETURN(std::vector<FileReader> files, FileReader::OpenAll(paths, {options.io, true}));
  return OpenFiles(std::move(files), std::move(features), options);
}

Result<std::unique_ptr<TFRecordDataset>> TFRecordDataset::OpenFiles(std::vector<FileReader> files,
                                                                    std::vector<FieldSpec> features,
                                                                    TFRecordOptions options) {
  if (files.empty()) return Status::InvalidArgument("TFRecordDataset: no files given");
  STOKER_RETURN_IF_ERROR(ValidateTFRecordFeatures(features, "TFRecordDataset"));
  std::unique_ptr<TFRecordDataset> d(new TFRecordDataset(std::move(features)));
  d->options_ = options;
  d->set_on_error(options.on_error);
  const bool skip = options.on_error == OnError::kSkip;
  for (FileReader& f : files) {
    STOKER_ASSIGN_OR_RETURN(TFRecordIndex idx, LoadOrBuildTFRecordIndex(f, {options.index_dir, skip, options.index_cache}));
    if (idx.bad_tail_offset != 0) d->CountSkipped(Status::DataLoss(idx.bad_tail_reason));
    d->starts_.push_back(d->starts_.back() + idx.records.size());
    d->records_.push_back(std::move(idx.records));
    d->index_paths_.push_back(idx.cache_path);
    d->files_.push_back(std::move(f));
  }
  return d;
}

std::pair<size_t, uint64_t> TFRecordDataset::Locate(uint64_t index) const {
  const size_t file = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), index) - starts_.begin()) - 1;
  return {file, index - starts_[file]};
}

Status TFRecordDataset::Read(uint64_t index, uint8_t* const* dst) {
  if (index >= size())
    return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() + " (" +
                                   std::to_string(size()) + " records)");
  const auto [file, rec] = Locate(index);
  const TFRecordEntry& e = records_[file][rec];
  thread_local std::vector<uint8_t> buf;
  uint32_t stored = 0;
  Result<const uint8_t*> data = ReadTFRecord(files_[file], e, rec, options_.verify_crc, &buf, &stored);
  if (!data.ok()) return data.status();
  // The data's CRC is computed while the values are copied into the slot
  // (one pass over the record, not two).
  Crc32cCursor crc(data.value(), data.value() + e.length);
  Status st = decoder_.Decode(data.value(), e.length, dst, options_.verify_crc ? &crc : nullptr);
  if (options_.verify_crc) {
    // A bad CRC is the cause of whatever else went wrong: report it first.
    Status bad = CheckTFRecordCrc(files_[file], e, rec, crc.Finish(), stored);
    if (!bad.ok()) return bad;
  }
  if (!st.ok())
    return Status::FromCode(st.code(), "TFRecord file " + files_[file].path() + ", record " + std::to_string(rec) +
                                           " (byte offset " + std::to_string(e.offset) + "): " + st.message());
  return Status::OK();
}

std::string TFRecordDataset::Describe() const {
  if (files_.size() == 1) return "TFRecord file " + files_[0].path();
  return std::to_string(files_.size()) + " TFRecord files (" + files_[0].path() + ", ...)";
}

}  // namespace stoker
