#include "io/file_reader.h"

#include "core/copy.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace stoker {

namespace {

constexpr uint64_t kDirectAlign = 4096;
constexpr uint64_t kDirectChunk = 8 << 20;  // bounce buffer per thread

struct AlignedBuffer {
  uint8_t* p = nullptr;
  ~AlignedBuffer() { std::free(p); }
};

}  // namespace

Result<IoMode> ParseIoMode(const std::string& name) {
  if (name == "pread") return IoMode::kPread;
  if (name == "mmap") return IoMode::kMmap;
  if (name == "direct") return IoMode::kDirect;
  return Status::InvalidArgument("io='" + name + "' is not one of 'pread', 'mmap', 'direct'");
}

FileReader::Mapping::~Mapping() {
  if (addr && owned) munmap(addr, len);
}

FileReader::~FileReader() = default;

Result<FileReader> FileReader::Open(const std::string& path, FileReaderOptions options) {
  FileReader r;
  const int flags = O_RDONLY | O_CLOEXEC | (options.mode == IoMode::kDirect ? O_DIRECT : 0);
  r.fd_.reset(open(path.c_str(), flags));
  if (!r.fd_.valid() && options.mode == IoMode::kDirect && errno == EINVAL)
    return Status::InvalidArgument("io='direct': the file system of " + path +
                                   " does not support O_DIRECT (tmpfs does not); use io='pread'");
  if (!r.fd_.valid()) return Status::IOError("open " + path, errno);
  struct stat st {};
  if (fstat(r.fd_.get(), &st) != 0) return Status::IOError("fstat " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + " is not a regular file");
  r.size_ = static_cast<uint64_t>(st.st_size);
  r.path_ = path;
  r.mode_ = options.mode;
  if (options.sequential) posix_fadvise(r.fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  if (options.mode == IoMode::kMmap && r.size_ > 0) {
    void* a = mmap(nullptr, r.size_, PROT_READ, MAP_SHARED, r.fd_.get(), 0);
    if (a == MAP_FAILED) return Status::IOError("mmap of " + path, errno);
    r.map_ = std::make_unique<Mapping>();
    r.map_->addr = a;
    r.map_->len = r.size_;
    madvise(a, r.size_, options.sequential ? MADV_SEQUENTIAL : MADV_NORMAL);
  }
  return r;
}

FileReader FileReader::OverMemory(std::string name, const uint8_t* data, uint64_t size) {
  FileReader r;
  r.size_ = size;
  r.path_ = std::move(name);
  r.mode_ = IoMode::kMmap;
  r.map_ = std::make_unique<Mapping>();
  r.map_->addr = const_cast<uint8_t*>(data);
  r.map_->len = size;
  r.map_->owned = false;
  return r;
}

Result<std::vector<FileReader>> FileReader::OpenAll(const std::vector<std::string>& paths, FileReaderOptions options) {
  std::vector<FileReader> files;
  files.reserve(paths.size());
  for (const std::string& p : paths) {
    STOKER_ASSIGN_OR_RETURN(FileReader f, Open(p, options));
    files.push_back(std::move(f));
  }
  return files;
}

Result<uint64_t> FileReader::CurrentSize() const {
  if (!fd_.valid()) return size_;  // OverMemory: fixed
  struct stat st {};
  if (fstat(fd_.get(), &st) != 0) return Status::IOError("fstat " + path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

Status FileReader::ShortFile(uint64_t offset, uint64_t n) const {
  struct stat st {};
  const uint64_t now = fstat(fd_.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : size_;
  return Status::IOError(path_ + " ends at byte " + std::to_string(now) + ", but a read of " + std::to_string(n) +
                         " bytes at offset " + std::to_string(offset) + " needs " + std::to_string(offset + n) +
                         " (truncated file?)", EIO);
}

Status FileReader::ReadAt(uint64_t offset, void* dst, uint64_t n) const { return Read(offset, dst, n, false); }

Status FileReader::Read(uint64_t offset, void* dst, uint64_t n, bool into_batch) const {
  auto* p = static_cast<uint8_t*>(dst);
  if (mode_ == IoMode::kMmap) {
    STOKER_ASSIGN_OR_RETURN(uint64_t now, CurrentSize());
    if (offset > std::min(size_, now) || n > std::min(size_, now) - offset) return ShortFile(offset, n);
    const uint8_t* src = static_cast<const uint8_t*>(map_ ? map_->addr : nullptr) + offset;
    if (into_batch) CollateCopy(p, src, n);
    else std::memcpy(p, src, n);
    return Status::OK();
  }
  if (mode_ == IoMode::kDirect) return DirectRead(offset, p, n);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd_.get(), p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("pread of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                             " of " + path_, errno);
    }
    if (got == 0) return ShortFile(offset, n);
    done += static_cast<uint64_t>(got);
  }
  return Status::OK();
}

Status FileReader::ReadOutPieces(const std::pair<uint64_t, uint8_t*>* pieces, uint64_t count, uint64_t n) const {
  if (count == 0) return Status::OK();
  if (mode_ == IoMode::kMmap) {
    STOKER_ASSIGN_OR_RETURN(uint64_t now, CurrentSize());
    const uint64_t end = std::min(size_, now);
    const uint8_t* base = static_cast<const uint8_t*>(map_ ? map_->addr : nullptr);
    for (uint64_t k = 0; k < count; ++k) {
      const auto [offset, dst] = pieces[k];
      if (offset > end || n > end - offset) return ShortFile(offset, n);
      CollateCopy(dst, base + offset, n);
    }
    return Status::OK();
  }
  if (mode_ == IoMode::kDirect) {
    for (uint64_t k = 0; k < count; ++k) STOKER_RETURN_IF_ERROR(DirectRead(pieces[k].first, pieces[k].second, n));
    return Status::OK();
  }
  thread_local std::vector<uint8_t> scratch;  // (touched only for pieces apart)
  for (uint64_t k = 0; k < count;) {
    uint64_t e = k + 1;
    bool in_place = true;
    while (e < count && pieces[e].first == pieces[e - 1].first + n && (e - k + 1) * n <= kRunBytes) {
      in_place = in_place && pieces[e].second == pieces[e - 1].second + n;
      ++e;
    }
    const uint64_t bytes = (e - k) * n;
    if (e - k == 1 || in_place) {
      STOKER_RETURN_IF_ERROR(Read(pieces[k].first, pieces[k].second, bytes, true));
    } else {
      if (scratch.size() < bytes) scratch.resize(bytes);
      STOKER_RETURN_IF_ERROR(Read(pieces[k].first, scratch.data(), bytes, false));
      for (uint64_t j = k; j < e; ++j) CollateCopy(pieces[j].second, scratch.data() + (j - k) * n, n);
    }
    k = e;
  }
  return Status::OK();
}

// O_DIRECT wants the offset, length and buffer aligned: read the aligned
// span covering [offset, offset+n) in chunks and copy the wanted bytes out.
Status FileReader::DirectRead(uint64_t offset, uint8_t* dst, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) return ShortFile(offset, n);
  thread_local AlignedBuffer buf;
  if (!buf.p && posix_memalign(reinterpret_cast<void**>(&buf.p), kDirectAlign, kDirectChunk) != 0)
    return Status::ResourceExhausted("no memory for the O_DIRECT buffer");
  uint64_t at = offset, left = n;
  while (left > 0) {
    const uint64_t start = at & ~(kDirectAlign - 1);
    const uint64_t skip = at - start;
    const uint64_t want = std::min<uint64_t>(kDirectChunk, (skip + left + kDirectAlign - 1) & ~(kDirectAlign - 1));
    ssize_t got;
    do {
      got = pread(fd_.get(), buf.p, want, static_cast<off_t>(start));
    } while (got < 0 && errno == EINTR);
    if (got < 0)
      return Status::IOError("O_DIRECT pread of " + std::to_string(want) + " bytes at offset " +
                             std::to_string(start) + " of " + path_, errno);
    if (static_cast<uint64_t>(got) <= skip) return ShortFile(offset, n);
    const uint64_t take = std::min<uint64_t>(left, static_cast<uint64_t>(got) - skip);
    std::memcpy(dst, buf.p + skip, take);
    dst += take;
    at += take;
    left -= take;
  }
  return Status::OK();
}

}  // namespace stoker
