#include "io/file_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace stoker {

Result<FileReader> FileReader::Open(const std::string& path) {
  FileReader r;
  r.fd_.reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!r.fd_.valid()) return Status::IOError("open " + path, errno);
  struct stat st {};
  if (fstat(r.fd_.get(), &st) != 0) return Status::IOError("fstat " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + " is not a regular file");
  r.size_ = static_cast<uint64_t>(st.st_size);
  r.path_ = path;
  return r;
}

Status FileReader::ReadAt(uint64_t offset, void* dst, uint64_t n) const {
  auto* p = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd_.get(), p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("pread of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                             " of " + path_, errno);
    }
    if (got == 0) {
      struct stat st {};
      const uint64_t now = fstat(fd_.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : offset + done;
      return Status::IOError(path_ + " ends at byte " + std::to_string(now) + ", but a read of " +
                             std::to_string(n) + " bytes at offset " + std::to_string(offset) + " needs " +
                             std::to_string(offset + n) + " (truncated file?)", EIO);
    }
    done += static_cast<uint64_t>(got);
  }
  return Status::OK();
}

}  // namespace stoker
