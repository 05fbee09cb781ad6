#include "shared/shared_block.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

namespace stoker {

Result<std::shared_ptr<SharedBlock>> SharedBlock::Create(uint64_t size, const std::string& name) {
  if (size == 0) return Status::InvalidArgument("a shared block needs at least one byte");
  UniqueFd fd(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Status::IOError("memfd_create(" + name + ")", errno);
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return Status::IOError("ftruncate of shared block " + name + " to " + std::to_string(size) + " bytes", errno);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return Status::IOError("mmap of " + std::to_string(size) + " bytes for " + name, errno);
  if (madvise(p, size, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
    munmap(p, size);
    return Status::ResourceExhausted("could not back " + std::to_string(size) + " bytes of shared memory for " + name +
                                     ": the machine (or this process's cgroup) is out of memory");
  }
  return std::shared_ptr<SharedBlock>(new SharedBlock(std::move(fd), static_cast<uint8_t*>(p), size, false));
}

Result<std::shared_ptr<SharedBlock>> SharedBlock::Map(UniqueFd fd, const std::string& what) {
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::IOError("fstat of " + what, errno);
  if (st.st_size <= 0) return Status::InvalidArgument(what + " is empty: not a stoker shared block");
  const int seals = fcntl(fd.get(), F_GET_SEALS);
  const bool sealed = seals > 0 && (seals & F_SEAL_WRITE);
  const auto size = static_cast<uint64_t>(st.st_size);
  void* p = mmap(nullptr, size, sealed ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return Status::IOError("mmap of " + what, errno);
  return std::shared_ptr<SharedBlock>(new SharedBlock(std::move(fd), static_cast<uint8_t*>(p), size, sealed));
}

Result<std::shared_ptr<SharedBlock>> SharedBlock::Open(int fd) {
  UniqueFd dup(fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!dup.valid()) return Status::IOError("dup of shared block fd " + std::to_string(fd), errno);
  return Map(std::move(dup), "shared block fd " + std::to_string(fd));
}

Result<std::shared_ptr<SharedBlock>> SharedBlock::OpenPath(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid() && (errno == EACCES || errno == EPERM)) fd.reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::IOError("open " + path, errno);
  return Map(std::move(fd), path);
}

SharedBlock::~SharedBlock() {
  if (base_) munmap(base_, size_);
}

Status SharedBlock::Seal() {
  if (sealed_) return Status::OK();
  if (munmap(base_, size_) != 0) return Status::IOError("munmap before sealing", errno);
  base_ = nullptr;
  const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
  if (fcntl(fd_.get(), F_ADD_SEALS, seals) != 0)
    return Status::IOError("sealing a shared block (another process maps it writable?)", errno);
  void* p = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_.get(), 0);
  if (p == MAP_FAILED) return Status::IOError("mmap of a sealed shared block", errno);
  base_ = static_cast<uint8_t*>(p);
  sealed_ = true;
  // Map every page here now: the contents stay mapped by their creator, so
  // memory accounting (PSS) charges them from the start and splits them
  // among the processes that read them, instead of charging the first
  // reader in full.
  if (madvise(base_, size_, MADV_POPULATE_READ) != 0) {
    volatile uint8_t sink = 0;
    for (uint64_t o = 0; o < size_; o += 4096) sink = sink + base_[o];
  }
  return Status::OK();
}

}  // namespace stoker
