// The shards of a dataset on a store, as listed by an index file there: one
// shard per line, "name size [crc32c [samples]]" (the CRC-32C as 8 hex
// digits or "-", the number of samples in the shard); blank lines and lines
// starting with '#' are skipped.  `stoker index DIR` (DescribeShard +
// FormatShardIndex) writes one for a directory of shards.
#ifndef STOKER_SHARD_INDEX_H_
#define STOKER_SHARD_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

enum class ShardFormat : uint8_t { kTFRecord = 0, kTar = 1 };

struct ShardInfo {
  std::string name;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  bool has_crc = false;
  uint64_t samples = 0;
  bool has_samples = false;  // false: learned when the shard is opened
};

// Errors name `where` and the line.
Result<std::vector<ShardInfo>> ParseShardIndex(const std::string& text, const std::string& where);
// The index file's text for `shards`.
std::string FormatShardIndex(const std::vector<ShardInfo>& shards);
// The format a shard's name says (".tfrecord", ".tfrecords", ".tfr" or
// ".tar"); InvalidArgument for any other.
Result<ShardFormat> ShardFormatOf(const std::string& name);
// Size, CRC-32C and number of samples (TFRecord records; tar samples grouped
// by key) of the shard file at `path`, named by its file name.
Result<ShardInfo> DescribeShard(const std::string& path, ShardFormat format);

}  // namespace stoker

#endif  // STOKER_SHARD_INDEX_H_
