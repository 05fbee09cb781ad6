// AtomicFile (atomic_file.h).
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

namespace stoker {

AtomicFile::AtomicFile(std::string path, std::string tmp, UniqueFd fd)
    : path_(std::move(path)), tmp_(std::move(tmp)), fd_(std::move(fd)) {}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(std::move(o.fd_)), pending_(std::exchange(o.pending_, false)) {}

AtomicFile::~AtomicFile() {
  if (!pending_) return;
  fd_.reset();
  unlink(tmp_.c_str());
}

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(syscall(SYS_gettid));
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return Status::IOError("create " + tmp, errno);
  return AtomicFile(path, std::move(tmp), std::move(fd));
}

Status AtomicFile::Append(const void* data, size_t n) {
  if (!fd_.valid()) return Status::InvalidArgument(path_ + " is already committed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd_.get(), p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("write " + tmp_, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status AtomicFile::Commit(bool sync) {
  if (!fd_.valid()) return Status::InvalidArgument(path_ + " is already committed");
  if (sync && fsync(fd_.get()) != 0) return Status::IOError("fsync " + tmp_, errno);
  fd_.reset();
  if (rename(tmp_.c_str(), path_.c_str()) != 0) return Status::IOError("rename " + tmp_ + " to " + path_, errno);
  pending_ = false;
  if (sync) {
    const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
    UniqueFd dir(open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid()) fsync(dir.get());  // (the name survives a crash; a failure here loses nothing written)
  }
  return Status::OK();
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes, bool sync) {
  STOKER_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  STOKER_RETURN_IF_ERROR(f.Append(bytes));
  return f.Commit(sync);
}

}  // namespace stoker
