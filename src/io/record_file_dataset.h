// Fixed-size records in one file, read with pread: RawDataset (a flat
// binary file of records of a declared dtype and shape) and NpyDataset (one
// .npy file, records along axis 0).  Both are one field; the batch is one
// tensor [batch, *shape].
#ifndef STOKER_IO_RECORD_FILE_DATASET_H_
#define STOKER_IO_RECORD_FILE_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "io/file_reader.h"
#include "stoker/native_dataset.h"

namespace stoker {

// What a .npy header says (format versions 1-3).
struct NpyHeader {
  ElementType dtype = ElementType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;
};
// InvalidArgument naming the file for anything not a C-order, little-endian
// .npy whose data is all there.  The .npy may be a part of the file: `size`
// bytes from `start` (a tar member), named `name` in messages; data_offset
// is then relative to the file.
Result<NpyHeader> ParseNpyHeader(const FileReader& file, uint64_t start, uint64_t size, const std::string& name);
inline Result<NpyHeader> ParseNpyHeader(const FileReader& file) {
  return ParseNpyHeader(file, 0, file.size(), file.path());
}

class RecordFileDataset : public NativeDataset {
 public:
  // Raw: records of `shape` elements of `dtype`, from byte 0 to the end; the
  // file's size must be a whole number of records.
  static Result<std::unique_ptr<RecordFileDataset>> OpenRaw(const std::string& path, ElementType dtype,
                                                            std::vector<int64_t> shape, IoMode io = IoMode::kPread);
  // .npy (format versions 1-3, little-endian or single-byte dtypes, C order):
  // records along axis 0.
  static Result<std::unique_ptr<RecordFileDataset>> OpenNpy(const std::string& path, IoMode io = IoMode::kPread);

  uint64_t size() const override { return count_; }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  // (the records by offset: a run of adjacent ones is one read)
  Status ReadBatch(const uint64_t* indices, uint64_t n, uint8_t* const* dsts) override;
  std::string Describe() const override { return kind_ + " " + file_.path(); }

 private:
  RecordFileDataset(FileReader f, std::string kind, FieldSpec field, uint64_t data_offset, uint64_t count);
  FileReader file_;
  std::string kind_;
  std::vector<FieldSpec> fields_;
  uint64_t data_offset_, record_bytes_, count_;
};

// A directory of .npy files, one sample each (sorted by name; all of one
// dtype and shape, checked when each is read).
class NpyDirDataset : public NativeDataset {
 public:
  static Result<std::unique_ptr<NpyDirDataset>> Open(const std::string& dir);
  uint64_t size() const override { return files_.size(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  std::string Describe() const override { return "directory of .npy files " + dir_; }

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<FieldSpec> fields_;
};

}  // namespace stoker

#endif  // STOKER_IO_RECORD_FILE_DATASET_H_
