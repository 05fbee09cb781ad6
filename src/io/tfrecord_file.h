// The TFRecord container: records framed as
//   u64 length | u32 masked_crc32c(length) | data[length] | u32 masked_crc32c(data)
// (little-endian), and an index of where each record starts, built by one
// pass over the headers on first use and cached in a file so that later runs
// (and random access, shuffling) need no pass.
#ifndef STOKER_IO_TFRECORD_FILE_H_
#define STOKER_IO_TFRECORD_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "io/file_reader.h"
#include "stoker/status.h"

namespace stoker {

inline constexpr uint64_t kTFRecordHeader = 12;  // length + its CRC
inline constexpr uint64_t kTFRecordFooter = 4;   // the data's CRC

struct TFRecordEntry {
  uint64_t offset = 0;  // of the record's header
  uint64_t length = 0;  // of its data
};

struct TFRecordIndex {
  std::vector<TFRecordEntry> records;
  // A damaged tail (bad length CRC, a length past the end of the file): the
  // bytes from there on are not records.  Only with skip_bad, else an error.
  uint64_t bad_tail_offset = 0;  // 0: none
  std::string bad_tail_reason;
  std::string cache_path;        // where it was loaded from / saved to ("" if nowhere)
  bool loaded_from_cache = false;
};

struct TFRecordIndexOptions {
  // Where index files go: "" puts <file>.stoker-index beside the file, or,
  // where that directory cannot be written, in $XDG_CACHE_HOME/stoker/index
  // (~/.cache/stoker/index).  Anything else: that directory.
  std::string index_dir;
  bool skip_bad = false;
  bool cache = true;  // false: build in memory only, no index file
};

// The index of `file`: loaded from its cache file when that matches the
// file (size, mtime, checksum), else built and saved (atomically; a failure
// to save is not an error).  DataLoss naming the file, record number and
// offset for a damaged container (unless skip_bad).
Result<TFRecordIndex> LoadOrBuildTFRecordIndex(const FileReader& file, const TFRecordIndexOptions& options);

// Reads record `entry` (number `record_no`, for messages) of `file` and
// checks its length (and the length's CRC when `verify`).  Returns its data:
// in the file's mapping (IoMode::kMmap) or else read into `buf`.  The data's
// CRC is left to the caller, who may compute it while decoding:
// *stored_crc is the masked CRC the file holds for it (CheckTFRecordCrc).
Result<const uint8_t*> ReadTFRecord(const FileReader& file, const TFRecordEntry& entry, uint64_t record_no,
                                    bool verify, std::vector<uint8_t>* buf, uint32_t* stored_crc);
// DataLoss naming the record unless MaskCrc(crc) == stored.
Status CheckTFRecordCrc(const FileReader& file, const TFRecordEntry& entry, uint64_t record_no, uint32_t crc,
                        uint32_t stored);

// Appends one framed record holding `data` to `out`.
void AppendTFRecord(std::string* out, const void* data, size_t n);

}  // namespace stoker

#endif  // STOKER_IO_TFRECORD_FILE_H_
