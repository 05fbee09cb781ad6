// FileSink: appends a download to a file descriptor through a large buffer
// (few, large pwrites instead of one per network read) and starts the
// kernel's writeback of each written chunk at once (sync_file_range), so the
// fsync that ends a download has little left to wait for.  It can keep the
// CRC-32C of what it writes, so a download is checked without reading it back.
#ifndef STOKER_STORE_FILE_SINK_H_
#define STOKER_STORE_FILE_SINK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

class FileSink {
 public:
  // Writes go to `fd` from offset `at` on; `what` names the target in
  // errors.  crc (optional): extended over every byte written.
  FileSink(int fd, uint64_t at, std::string what, uint32_t* crc = nullptr, size_t buffer_bytes = size_t{4} << 20);
  // Buffers `n` bytes (writing the buffer when it fills).
  Status Append(const char* p, size_t n);
  // Writes whatever is buffered.  Call it before looking at the file, and
  // after a failed transfer too (the bytes received are kept for a resume).
  Status Flush();
  // The offset the next byte goes to (written and buffered bytes).
  uint64_t at() const { return written_ + used_; }

 private:
  Status Write(const char* p, size_t n);
  int fd_;
  uint32_t* crc_;
  uint64_t written_;
  std::string what_;
  std::vector<char> buf_;
  size_t used_ = 0;
};

}  // namespace stoker

#endif  // STOKER_STORE_FILE_SINK_H_
