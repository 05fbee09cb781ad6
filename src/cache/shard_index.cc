#include "stoker/shard_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "cache/shard_cache.h"
#include "core/unique_fd.h"
#include "io/file_reader.h"
#include "io/tar_file.h"
#include "io/tfrecord_file.h"

namespace stoker {

Result<std::vector<ShardInfo>> ParseShardIndex(const std::string& text, const std::string& where) {
  std::vector<ShardInfo> out;
  std::unordered_set<std::string> names;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.empty() || line[0] == '#' || line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string at = where;  // (appended, not a + chain: gcc 12 warns falsely on that one)
    at.append(" line ").append(std::to_string(no)).append(": ");
    std::istringstream f(line);
    ShardInfo s;
    std::string crc, samples, extra;
    if (!(f >> s.name >> s.size))
      return Status::InvalidArgument(at + "expected 'name size [crc32c [samples]]', got '" + line + "'");
    if (!IsPlainShardName(s.name))
      return Status::InvalidArgument(at + "shard name '" + s.name + "' must be a plain file name");
    if (!names.insert(s.name).second) return Status::InvalidArgument(at + "shard '" + s.name + "' is listed twice");
    if (f >> crc && crc != "-") {
      char* end = nullptr;
      const unsigned long v = std::strtoul(crc.c_str(), &end, 16);
      if (crc.size() != 8 || *end) return Status::InvalidArgument(at + "crc32c '" + crc + "' is not 8 hex digits (or -)");
      s.crc32c = static_cast<uint32_t>(v);
      s.has_crc = true;
    }
    if (f >> samples) {
      char* end = nullptr;
      errno = 0;
      s.samples = std::strtoull(samples.c_str(), &end, 10);
      if (samples[0] == '-' || *end || errno != 0)
        return Status::InvalidArgument(at + "samples '" + samples + "' is not a number");
      s.has_samples = true;
    }
    if (f >> extra) return Status::InvalidArgument(at + "unexpected '" + extra + "' after 'name size crc32c samples'");
    out.push_back(std::move(s));
  }
  return out;
}

std::string FormatShardIndex(const std::vector<ShardInfo>& shards) {
  std::string out = "# name size crc32c samples (stoker shard index)\n";
  for (const ShardInfo& s : shards) {
    char crc[16] = "-";
    if (s.has_crc) std::snprintf(crc, sizeof crc, "%08x", s.crc32c);
    out.append(s.name).append(" ").append(std::to_string(s.size)).append(" ").append(crc);
    if (s.has_samples) out.append(" ").append(std::to_string(s.samples));
    out.append("\n");
  }
  return out;
}

Result<ShardFormat> ShardFormatOf(const std::string& name) {
  const size_t dot = name.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : name.substr(dot);
  if (ext == ".tfrecord" || ext == ".tfrecords" || ext == ".tfr") return ShardFormat::kTFRecord;
  if (ext == ".tar") return ShardFormat::kTar;
  return Status::InvalidArgument("shard '" + name + "': cannot tell its format from the name (.tfrecord or .tar); "
                                 "say format='tfrecord' or 'tar'");
}

Result<ShardInfo> DescribeShard(const std::string& path, ShardFormat format) {
  ShardInfo s;
  const size_t slash = path.rfind('/');
  s.name = slash == std::string::npos ? path : path.substr(slash + 1);
  STOKER_ASSIGN_OR_RETURN(FileReader f, FileReader::Open(path, {IoMode::kPread, true}));
  s.size = f.size();
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::IOError("open " + path, errno);
  STOKER_ASSIGN_OR_RETURN(s.crc32c, FileCrc32c(fd.get(), s.size, path));
  s.has_crc = true;
  if (format == ShardFormat::kTFRecord) {
    STOKER_ASSIGN_OR_RETURN(TFRecordIndex idx, LoadOrBuildTFRecordIndex(f, {"", false, false}));
    s.samples = idx.records.size();
    s.has_samples = true;
  } else {
    STOKER_ASSIGN_OR_RETURN(TarListing t, ListTar(f, false));
    std::unordered_set<std::string> keys;
    for (const TarMember& m : t.members) {
      std::string key, ext;
      SplitTarKey(m.path, &key, &ext);
      keys.insert(key);
    }
    s.samples = keys.size();
    s.has_samples = true;
  }
  return s;
}

}  // namespace stoker
