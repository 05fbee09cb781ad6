// TarShardDataset: WebDataset-style tar shards.  Members are grouped into
// samples by key (the path up to the first '.' of the file name); each
// extension is a field:
//   kNpy    a .npy member: a tensor of the dtype and shape of the first
//           sample's (every sample must match);
//   kRaw    raw bytes of a declared dtype and shape;
//   kInt    an ASCII integer (WebDataset's .cls): an int64 scalar;
//   kBytes  any bytes: a variable-length uint8 tensor per sample.
// Without declared fields they are inferred from the first sample: .npy ->
// kNpy, .cls/.cls2/.index/.idx/.label/.id -> kInt, anything else -> kBytes.
#ifndef STOKER_IO_TAR_SHARD_DATASET_H_
#define STOKER_IO_TAR_SHARD_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "io/file_reader.h"
#include "io/tar_file.h"
#include "stoker/native_dataset.h"
#include "stoker/tar_fields.h"

namespace stoker {

struct TarShardOptions {
  IoMode io = IoMode::kPread;
  OnError on_error = OnError::kRaise;
};

// The field a declaration makes with no shard to look at, `what` naming it
// in errors; false for kNpy, whose dtype and shape come from the first
// sample.
Result<bool> DeclaredFieldSpec(const TarFieldDecl& decl, const std::string& what, FieldSpec* spec);

class TarShardDataset : public NativeDataset {
 public:
  // `fields` empty: inferred from the first sample.
  static Result<std::unique_ptr<TarShardDataset>> Open(const std::vector<std::string>& paths,
                                                       std::vector<TarFieldDecl> fields, TarShardOptions options = {});
  // Over files already open (e.g. FileReader::OverMemory); options.io is
  // theirs, not used here.
  static Result<std::unique_ptr<TarShardDataset>> OpenFiles(std::vector<FileReader> files,
                                                            std::vector<TarFieldDecl> fields,
                                                            TarShardOptions options = {});
  uint64_t size() const override { return samples_.size(); }
  const std::vector<FieldSpec>& fields() const override { return specs_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  const std::vector<TarFieldDecl>& decls() const { return decls_; }
  // The key of sample `index` ("shard.tar:key" in messages).
  const std::string& key(uint64_t index) const { return samples_[index].key; }

 private:
  struct Sample {
    uint32_t shard;
    std::string key;
    std::vector<int64_t> member;  // per field: index into members_[shard], -1 if absent
  };
  Status Where(uint64_t index, const std::string& what) const;
  Status CheckIndex(uint64_t index) const;
  std::vector<TarFieldDecl> decls_;
  std::vector<FieldSpec> specs_;
  std::vector<uint64_t> npy_data_skip_;  // kNpy: header bytes in the first sample (for messages)
  std::vector<FileReader> files_;
  std::vector<std::vector<TarMember>> members_;
  std::vector<Sample> samples_;
};

}  // namespace stoker

#endif  // STOKER_IO_TAR_SHARD_DATASET_H_
