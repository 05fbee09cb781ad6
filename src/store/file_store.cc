#include "store/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "store/file_sink.h"
#include "core/unique_fd.h"
#include "io/crc32c.h"
#include "io/file_reader.h"

namespace stoker {

Result<uint64_t> FileStore::Size(const std::string& name) {
  ++requests_;
  struct stat st {};
  if (stat(Locate(name).c_str(), &st) != 0) return Status::IOError("stat " + Locate(name), errno);
  return static_cast<uint64_t>(st.st_size);
}

Status FileStore::Read(const std::string& name, uint64_t offset, uint64_t n, void* dst, uint32_t* crc32c,
                       const ReadReady* ready) {
  ++requests_;
  STOKER_ASSIGN_OR_RETURN(FileReader f, FileReader::Open(Locate(name)));
  if (ready) STOKER_RETURN_IF_ERROR((*ready)(n));  // (one read: all of it)
  if (!crc32c) {
    STOKER_RETURN_IF_ERROR(f.ReadAt(offset, dst, n));
  } else {  // piece by piece, each checksummed while it is in the cache
    constexpr uint64_t kPiece = 1 << 20;
    auto* out = static_cast<uint8_t*>(dst);
    uint32_t crc = 0;
    for (uint64_t at = 0; at < n; at += kPiece) {
      const uint64_t k = std::min(kPiece, n - at);
      STOKER_RETURN_IF_ERROR(f.ReadAt(offset + at, out + at, k));
      crc = Crc32cExtend(crc, out + at, k);
    }
    *crc32c = crc;
  }
  bytes_ += n;
  return Status::OK();
}

Status FileStore::Download(const std::string& name, int fd, uint64_t expected_size, uint64_t* bytes,
                           uint32_t* crc32c) {
  ++requests_;
  const std::string path = Locate(name);
  UniqueFd in(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return Status::IOError("open " + path, errno);
  struct stat st {};
  if (fstat(in.get(), &st) != 0) return Status::IOError("fstat " + path, errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (expected_size && size != expected_size)
    return Status::DataLoss(path + " has " + std::to_string(size) + " bytes, the index says " +
                            std::to_string(expected_size));
  struct stat out {};
  if (fstat(fd, &out) != 0) return Status::IOError("fstat of the download target", errno);
  uint64_t at = static_cast<uint64_t>(out.st_size);
  if (at > size) return Status::DataLoss("a partial download of " + path + " is longer than the file");
  std::vector<char> buf(1 << 20);
  FileSink sink(fd, at, "a download of " + path, crc32c);
  while (at < size) {
    const ssize_t got = pread(in.get(), buf.data(), std::min<uint64_t>(buf.size(), size - at), static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? Status::IOError("read " + path, errno) : Status::DataLoss(path + " shrank while copied");
    STOKER_RETURN_IF_ERROR(sink.Append(buf.data(), static_cast<size_t>(got)));
    at += static_cast<uint64_t>(got);
    bytes_ += static_cast<uint64_t>(got);
  }
  STOKER_RETURN_IF_ERROR(sink.Flush());
  *bytes = size;
  return Status::OK();
}

Result<std::string> FileStore::ReadAll(const std::string& name) {
  STOKER_ASSIGN_OR_RETURN(uint64_t n, Size(name));
  std::string out(n, '\0');
  STOKER_RETURN_IF_ERROR(Read(name, 0, n, out.data()));
  return out;
}

}  // namespace stoker
