// FileReader: positional reads of one file (pread; no shared offset, so any
// number of threads read at once), with errors that name the file.
#ifndef STOKER_IO_FILE_READER_H_
#define STOKER_IO_FILE_READER_H_

#include <cstdint>
#include <string>

#include "core/unique_fd.h"
#include "stoker/status.h"

namespace stoker {

class FileReader {
 public:
  static Result<FileReader> Open(const std::string& path);
  // Reads exactly n bytes at offset; IOError naming the file and offset on
  // failure or end of file.
  Status ReadAt(uint64_t offset, void* dst, uint64_t n) const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  UniqueFd fd_;
  uint64_t size_ = 0;
  std::string path_;
};

}  // namespace stoker

#endif  // STOKER_IO_FILE_READER_H_
