// TFRecordDataset: tf.train.Example records from one or more TFRecord files,
// random access through a cached index (io/tfrecord_file.h), each record's
// CRCs checked and its features decoded into declared tensors
// (io/example_decoder.h).
#ifndef STOKER_IO_TFRECORD_DATASET_H_
#define STOKER_IO_TFRECORD_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "io/example_decoder.h"
#include "io/file_reader.h"
#include "io/tfrecord_file.h"
#include "stoker/native_dataset.h"

namespace stoker {

struct TFRecordOptions {
  std::string index_dir;  // see TFRecordIndexOptions
  bool index_cache = true;  // false: index in memory only
  bool verify_crc = true;
  // Mapped by default: the CRC and the values are taken straight from the
  // page cache in one pass (pread copies each record once more first).
  IoMode io = IoMode::kMmap;
  OnError on_error = OnError::kRaise;
};

// InvalidArgument (starting with `what`) unless `features` are declared,
// named, unique and of a valid fixed shape.
Status ValidateTFRecordFeatures(const std::vector<FieldSpec>& features, const std::string& what);

class TFRecordDataset : public NativeDataset {
 public:
  static Result<std::unique_ptr<TFRecordDataset>> Open(const std::vector<std::string>& paths,
                                                       std::vector<FieldSpec> features, TFRecordOptions options = {});
  // Over files already open (e.g. FileReader::OverMemory); options.io is
  // theirs, not used here.
  static Result<std::unique_ptr<TFRecordDataset>> OpenFiles(std::vector<FileReader> files,
                                                            std::vector<FieldSpec> features,
                                                            TFRecordOptions options = {});
  uint64_t size() const override { return starts_.back(); }
  const std::vector<FieldSpec>& fields() const override { return decoder_.features(); }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  std::string Describe() const override;
  // Where record `index` lives (file number, record number in that file).
  std::pair<size_t, uint64_t> Locate(uint64_t index) const;
  const std::vector<std::string>& index_paths() const { return index_paths_; }

 private:
  TFRecordDataset(std::vector<FieldSpec> f) : decoder_(std::move(f)) {}
  ExampleDecoder decoder_;
  TFRecordOptions options_;
  std::vector<FileReader> files_;
  std::vector<std::vector<TFRecordEntry>> records_;
  std::vector<uint64_t> starts_{0};  // prefix sums of records per file
  std::vector<std::string> index_paths_;
};

}  // namespace stoker

#endif  // STOKER_IO_TFRECORD_DATASET_H_
