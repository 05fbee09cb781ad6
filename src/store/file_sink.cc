#include "store/file_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/crc32c.h"

namespace stoker {

FileSink::FileSink(int fd, uint64_t at, std::string what, uint32_t* crc, size_t buffer_bytes)
    : fd_(fd), crc_(crc), written_(at), what_(std::move(what)), buf_(buffer_bytes) {}

Status FileSink::Append(const char* p, size_t n) {
  // A large piece with nothing buffered goes straight out (one copy fewer).
  if (used_ == 0 && n >= buf_.size() / 8) return Write(p, n);
  while (n > 0) {
    const size_t k = std::min(n, buf_.size() - used_);
    std::memcpy(buf_.data() + used_, p, k);
    used_ += k;
    p += k;
    n -= k;
    if (used_ == buf_.size()) STOKER_RETURN_IF_ERROR(Flush());
  }
  return Status::OK();
}

Status FileSink::Flush() {
  const size_t n = used_;
  used_ = 0;
  return Write(buf_.data(), n);
}

Status FileSink::Write(const char* p, size_t n) {
  const uint64_t start = written_;
  for (size_t done = 0; done < n;) {
    const ssize_t w = pwrite(fd_, p + done, n - done, static_cast<off_t>(written_));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      // What was written stays: a resume goes on from it.  A full disk is
      // not the store's fault: the cache makes room (ShardCache::Reserve).
      const int err = errno;
      Status st = Status::IOError("writing " + what_, err);
      return err == ENOSPC || err == EDQUOT ? Status::ResourceExhausted(st.message() + ": the cache's disk is full")
                                            : st;
    }
    if (crc_) *crc_ = Crc32cExtend(*crc_, p + done, static_cast<size_t>(w));
    done += static_cast<size_t>(w);
    written_ += static_cast<uint64_t>(w);
  }
  // Start writing these pages back now (no wait): the final fsync then
  // finds most of the file on its way to the disk.  Best effort.
  if (written_ > start)
    sync_file_range(fd_, static_cast<off_t>(start), static_cast<off_t>(written_ - start), SYNC_FILE_RANGE_WRITE);
  return Status::OK();
}

}  // namespace stoker
