#include "io/tfrecord_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/atomic_file.h"
#include "core/unique_fd.h"
#include "io/crc32c.h"

namespace stoker {

namespace {

constexpr char kIndexMagic[8] = {'S', 'T', 'K', 'T', 'F', 'I', 'X', '1'};

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string Where(const std::string& path, uint64_t record_no, uint64_t offset) {
  return "TFRecord file " + path + ", record " + std::to_string(record_no) + " (byte offset " +
         std::to_string(offset) + ")";
}

// Identity of the file's contents as the index saw them.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_s = 0, mtime_ns = 0;
  uint64_t inode = 0;
};

Result<FileStamp> Stamp(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Status::IOError("stat " + path, errno);
  return FileStamp{static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                   static_cast<uint64_t>(st.st_ino)};
}

std::vector<std::string> CandidatePaths(const std::string& file, const std::string& index_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs = fs::absolute(file, ec);
  const std::string name = fs::path(file).filename().string();
  const std::string hashed =
      name + "." + std::to_string(std::hash<std::string>{}(abs.string()) & 0xffffffffu) + ".stoker-index";
  if (!index_dir.empty()) return {(fs::path(index_dir) / hashed).string()};
  std::vector<std::string> out{file + ".stoker-index"};
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg && *xdg)
    out.push_back((fs::path(xdg) / "stoker" / "index" / hashed).string());
  else if (home && *home)
    out.push_back((fs::path(home) / ".cache" / "stoker" / "index" / hashed).string());
  return out;
}

// Layout: magic, size, mtime_s, mtime_ns, inode, bad_tail_offset, count,
// count x (offset, length), crc32c of all before.
bool LoadIndex(const std::string& path, const FileStamp& stamp, TFRecordIndex* out) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || st.st_size < 64) return false;
  std::vector<uint8_t> b(static_cast<size_t>(st.st_size));
  if (pread(fd.get(), b.data(), b.size(), 0) != static_cast<ssize_t>(b.size())) return false;
  if (std::memcmp(b.data(), kIndexMagic, 8) != 0) return false;
  if (Crc32c(b.data(), b.size() - 4) != LoadU32(b.data() + b.size() - 4)) return false;
  const uint64_t count = LoadU64(b.data() + 56);
  if (b.size() != 64 + count * 16 + 4) return false;
  if (LoadU64(b.data() + 8) != stamp.size || static_cast<int64_t>(LoadU64(b.data() + 16)) != stamp.mtime_s ||
      static_cast<int64_t>(LoadU64(b.data() + 24)) != stamp.mtime_ns || LoadU64(b.data() + 32) != stamp.inode)
    return false;
  out->bad_tail_offset = LoadU64(b.data() + 40);
  out->records.resize(count);
  for (uint64_t i = 0; i < count; ++i)
    out->records[i] = {LoadU64(b.data() + 64 + 16 * i), LoadU64(b.data() + 72 + 16 * i)};
  return true;
}

bool SaveIndex(const std::string& path, const FileStamp& stamp, const TFRecordIndex& idx) {
  std::string b(kIndexMagic, 8);
  auto put = [&b](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  put(stamp.size);
  put(static_cast<uint64_t>(stamp.mtime_s));
  put(static_cast<uint64_t>(stamp.mtime_ns));
  put(stamp.inode);
  put(idx.bad_tail_offset);
  put(0);  // reserved
  put(idx.records.size());
  for (const TFRecordEntry& e : idx.records) {
    put(e.offset);
    put(e.length);
  }
  const uint32_t crc = Crc32c(b.data(), b.size());
  b.append(reinterpret_cast<const char*>(&crc), 4);
  // Concurrent builders (ranks of one node) each write a whole file and the
  // last rename wins.  Not fsynced: a lost index is built again.
  return WriteFileAtomically(path, b, /*sync=*/false).ok();
}

Status BuildIndex(const FileReader& file, bool skip_bad, TFRecordIndex* idx) {
  const uint64_t size = file.size();
  uint64_t off = 0;
  uint8_t h[kTFRecordHeader];
  for (uint64_t n = 0; off < size; ++n) {
    std::string bad;
    if (size - off < kTFRecordHeader) {
      bad = "only " + std::to_string(size - off) + " bytes left, a record header needs 12 (truncated file?)";
    } else {
      STOKER_RETURN_IF_ERROR(file.ReadAt(off, h, kTFRecordHeader));
      const uint64_t len = LoadU64(h);
      if (MaskCrc(Crc32c(h, 8)) != LoadU32(h + 8)) {
        bad = "the length's CRC does not match (not a TFRecord file, or corrupt)";
      } else if (len > size - off - kTFRecordHeader || size - off - kTFRecordHeader - len < kTFRecordFooter) {
        bad = "the record claims " + std::to_string(len) + " bytes of data, but the file ends " +
              std::to_string(size - off) + " bytes after its start (truncated file?)";
      } else {
        idx->records.push_back({off, len});
        off += kTFRecordHeader + len + kTFRecordFooter;
        continue;
      }
    }
    if (!skip_bad) return Status::DataLoss(Where(file.path(), n, off) + ": " + bad);
    idx->bad_tail_offset = off;
    idx->bad_tail_reason = Where(file.path(), n, off) + ": " + bad;
    break;
  }
  return Status::OK();
}

}  // namespace

Result<TFRecordIndex> LoadOrBuildTFRecordIndex(const FileReader& file, const TFRecordIndexOptions& options) {
  FileStamp stamp{};
  if (options.cache) {  // (a file in memory has no stamp, and no index file)
    STOKER_ASSIGN_OR_RETURN(stamp, Stamp(file.path()));
  }
  const std::vector<std::string> candidates =
      options.cache ? CandidatePaths(file.path(), options.index_dir) : std::vector<std::string>{};
  TFRecordIndex idx;
  for (const std::string& c : candidates) {
    if (LoadIndex(c, stamp, &idx)) {
      if (idx.bad_tail_offset != 0) {
        if (!options.skip_bad) {
          // Rebuild to produce the precise error.
          idx = TFRecordIndex{};
          break;
        }
        idx.bad_tail_reason = "TFRecord file " + file.path() + ": bytes from offset " +
                              std::to_string(idx.bad_tail_offset) + " on are not records (as indexed before)";
      }
      idx.cache_path = c;
      idx.loaded_from_cache = true;
      return idx;
    }
    idx = TFRecordIndex{};
  }
  STOKER_RETURN_IF_ERROR(BuildIndex(file, options.skip_bad, &idx));
  for (const std::string& c : candidates)
    if (SaveIndex(c, stamp, idx)) {
      idx.cache_path = c;
      break;
    }
  return idx;
}

Result<const uint8_t*> ReadTFRecord(const FileReader& file, const TFRecordEntry& e, uint64_t record_no,
                                    bool verify, std::vector<uint8_t>* buf, uint32_t* stored_crc) {
  const uint64_t total = kTFRecordHeader + e.length + kTFRecordFooter;
  const uint8_t* p = file.Mapped(e.offset, total);
  if (p) {
    // Mapped: make sure the file still has these bytes (else SIGBUS).
    STOKER_ASSIGN_OR_RETURN(uint64_t now, file.CurrentSize());
    if (e.offset > now || total > now - e.offset) p = nullptr;
  }
  if (!p) {
    if (file.mode() == IoMode::kMmap || e.offset > file.size() || total > file.size() - e.offset)
      return Status::DataLoss(Where(file.path(), record_no, e.offset) + ": the record (" + std::to_string(total) +
                              " bytes) runs past the end of the file (" + std::to_string(file.size()) +
                              " bytes; truncated after it was indexed?)");
    if (buf->size() < total) buf->resize(total);
    Status st = file.ReadAt(e.offset, buf->data(), total);
    if (!st.ok()) {
      if (st.message().find("truncated") != std::string::npos)
        return Status::DataLoss(Where(file.path(), record_no, e.offset) + ": " + st.message());
      return st;
    }
    p = buf->data();
  }
  if (LoadU64(p) != e.length)
    return Status::DataLoss(Where(file.path(), record_no, e.offset) + ": the record's length is " +
                            std::to_string(LoadU64(p)) + ", the index says " + std::to_string(e.length) +
                            " (the file changed after it was indexed?)");
  if (verify && MaskCrc(Crc32c(p, 8)) != LoadU32(p + 8))
    return Status::DataLoss(Where(file.path(), record_no, e.offset) + ": the length's CRC does not match");
  *stored_crc = LoadU32(p + kTFRecordHeader + e.length);
  return p + kTFRecordHeader;
}

Status CheckTFRecordCrc(const FileReader& file, const TFRecordEntry& e, uint64_t record_no, uint32_t crc,
                        uint32_t stored) {
  if (MaskCrc(crc) == stored) return Status::OK();
  return Status::DataLoss(Where(file.path(), record_no, e.offset) + ": the data's CRC does not match (stored " +
                          std::to_string(stored) + ", computed " + std::to_string(MaskCrc(crc)) +
                          "): the record is corrupt");
}

void AppendTFRecord(std::string* out, const void* data, size_t n) {
  const uint64_t len = n;
  char h[kTFRecordHeader];
  std::memcpy(h, &len, 8);
  const uint32_t lc = MaskCrc(Crc32c(h, 8));
  std::memcpy(h + 8, &lc, 4);
  out->append(h, kTFRecordHeader);
  out->append(static_cast<const char*>(data), n);
  const uint32_t dc = MaskCrc(Crc32c(data, n));
  out->append(reinterpret_cast<const char*>(&dc), 4);
}

}  // namespace stoker
