// AtomicFile: a file that appears under its name whole or not at all.  It is
// written under a temporary name beside its path (unique to the process and
// thread, so that several writers of one file each write a whole one and
// the last rename wins), then Commit: fsync (optional), rename into place,
// fsync of the directory.  Destroyed uncommitted, it removes what it wrote.
//
// Every writer of finished files uses it: the TFRecord writer, the cached
// TFRecord index, stoker.io.write_tar_shards and stoker.cache.write_index.
// (A shard cache download is not one: it is resumed from its .part file and
// renamed under the cache's directory lock, shard_cache.cc.)
#ifndef STOKER_CORE_ATOMIC_FILE_H_
#define STOKER_CORE_ATOMIC_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "core/unique_fd.h"
#include "stoker/status.h"

namespace stoker {

class AtomicFile {
 public:
  // Creates the temporary file (and the directories above `path`).
  static Result<AtomicFile> Create(const std::string& path);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  ~AtomicFile();

  Status Append(const void* data, size_t n);
  Status Append(std::string_view s) { return Append(s.data(), s.size()); }
  // `sync` false: a file that may be lost in a crash (a cache of something
  // rebuilt from the data) is still never seen half written.
  Status Commit(bool sync = true);

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  AtomicFile(std::string path, std::string tmp, UniqueFd fd);
  std::string path_, tmp_;
  UniqueFd fd_;
  bool pending_ = true;  // the temporary file is ours to remove
};

// The whole of `bytes` as the file `path`, atomically.
Status WriteFileAtomically(const std::string& path, std::string_view bytes, bool sync = true);

}  // namespace stoker

#endif  // STOKER_CORE_ATOMIC_FILE_H_
