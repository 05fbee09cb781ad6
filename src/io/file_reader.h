// FileReader: positional reads of one file, with errors that name the file.
// Any number of threads read at once (no shared offset).
//
// Modes (IoMode):
//   kPread   pread(2) through the page cache (the default);
//   kMmap    the file mapped once, reads are copies out of the mapping (no
//            system call per read; a file truncated while mapped raises
//            SIGBUS, so only for files nobody rewrites);
//   kDirect  O_DIRECT: reads bypass the page cache, through an aligned
//            per-thread bounce buffer (for data read once per epoch that
//            would otherwise evict everything else from the cache).
#ifndef STOKER_IO_FILE_READER_H_
#define STOKER_IO_FILE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/unique_fd.h"
#include "stoker/status.h"

namespace stoker {

enum class IoMode : uint8_t { kPread = 0, kMmap = 1, kDirect = 2 };
Result<IoMode> ParseIoMode(const std::string& name);  // "pread", "mmap", "direct"

struct FileReaderOptions {
  IoMode mode = IoMode::kPread;
  bool sequential = false;  // posix_fadvise(SEQUENTIAL): larger kernel read-ahead
};

class FileReader {
 public:
  static Result<FileReader> Open(const std::string& path, FileReaderOptions options = {});
  // Reads of `size` bytes at `data` that the caller owns and keeps alive
  // (and unchanged) while the reader exists; kMmap without a file.  `name`
  // stands for the file in messages.
  static FileReader OverMemory(std::string name, const uint8_t* data, uint64_t size);
  // Open for each of `paths`, in order; the first error.
  static Result<std::vector<FileReader>> OpenAll(const std::vector<std::string>& paths, FileReaderOptions options = {});
  FileReader() = default;
  FileReader(FileReader&&) noexcept = default;
  FileReader& operator=(FileReader&&) noexcept = default;
  ~FileReader();
  // Reads exactly n bytes at offset; IOError naming the file and offset on
  // failure or end of file.
  Status ReadAt(uint64_t offset, void* dst, uint64_t n) const;
  // ReadAt for bytes going into a batch: from a mapping (or memory) with
  // CollateCopy (core/copy.h), not a plain memcpy.
  Status ReadOut(uint64_t offset, void* dst, uint64_t n) const { return Read(offset, dst, n, true); }
  // ReadOut of `count` pieces of n bytes, each an (offset, destination),
  // offsets ascending: a run of adjacent pieces is one pread (into place
  // when its destinations are adjacent too, else through a per-thread
  // buffer); from a mapping the file's size is checked once.  At most
  // kRunBytes a read.
  Status ReadOutPieces(const std::pair<uint64_t, uint8_t*>* pieces, uint64_t count, uint64_t n) const;
  static constexpr uint64_t kRunBytes = uint64_t{256} << 10;
  // kMmap only: the mapped bytes [offset, offset+n), or nullptr (another
  // mode, or out of range).
  const uint8_t* Mapped(uint64_t offset, uint64_t n) const {
    return map_ && offset <= size_ && n <= size_ - offset ? static_cast<const uint8_t*>(map_->addr) + offset
                                                          : nullptr;
  }
  uint64_t size() const { return size_; }
  // The file's size now (fstat): a mapped file that shrank since it was
  // opened would raise SIGBUS where it no longer has pages.
  Result<uint64_t> CurrentSize() const;
  const std::string& path() const { return path_; }
  IoMode mode() const { return mode_; }

 private:
  Status DirectRead(uint64_t offset, uint8_t* dst, uint64_t n) const;
  Status ShortFile(uint64_t offset, uint64_t n) const;
  Status Read(uint64_t offset, void* dst, uint64_t n, bool into_batch) const;
  UniqueFd fd_;
  uint64_t size_ = 0;
  std::string path_;
  IoMode mode_ = IoMode::kPread;
  struct Mapping {
    void* addr = nullptr;
    uint64_t len = 0;
    bool owned = true;  // false: OverMemory's (the caller unmaps it)
    ~Mapping();
  };
  std::unique_ptr<Mapping> map_;
};

}  // namespace stoker

#endif  // STOKER_IO_FILE_READER_H_
