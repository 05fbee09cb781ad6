#include "shm/arena.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <new>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace stoker {

Result<std::shared_ptr<Arena>> Arena::Create(const ArenaGeometry& g) {
  if (g.num_workers > 4096) return Status::InvalidArgument("num_workers must be at most 4096");
  if (g.max_slots == 0 || g.max_slots > (1u << 20))
    return Status::InvalidArgument("max_slots must be in [1, 1048576]");
  const uint64_t workers_off = AlignUp(sizeof(ControlBlock), 4096);
  const uint64_t slots_off = AlignUp(workers_off + uint64_t{g.num_workers} * sizeof(WorkerBlock), 4096);
  const uint64_t data_off = AlignUp(slots_off + uint64_t{g.max_slots} * sizeof(SlotHeader), 4096);
  // Resident bytes (control area included) never exceed max_memory; the
  // address space is larger so that free space is rarely too fragmented.
  const uint64_t max_memory = (g.max_memory ? g.max_memory : g.reserve_bytes) / 4096 * 4096;
  const uint64_t reserve = std::max(AlignUp(g.reserve_bytes, 4096), max_memory);
  if (max_memory < data_off + kMinDataBytes)
    return Status::InvalidArgument(
        "a slot arena of " + std::to_string(max_memory) + " bytes is too small: " + std::to_string(g.num_workers) +
        " workers and " + std::to_string(g.max_slots) + " slots take " + std::to_string(data_off) +
        " bytes of control area, and batches need at least " + std::to_string(kMinDataBytes) + " more");
  UniqueFd fd;
  void* p;
  if (g.process_shared) {
    fd = UniqueFd(static_cast<int>(memfd_create("stoker-arena", MFD_CLOEXEC)));
    if (!fd.valid()) return Status::IOError("memfd_create(stoker-arena)", errno);
    if (ftruncate(fd.get(), static_cast<off_t>(data_off)) != 0)
      return Status::IOError("ftruncate of the arena to " + std::to_string(data_off) + " bytes", errno);
    p = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd.get(), 0);
  } else {
    p = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (p == MAP_FAILED)
    return Status::IOError("mmap of " + std::to_string(reserve) + " bytes for the slot arena", errno);
  // (no huge pages: see arena.h; advice, fine where the kernel has none)
  if (!g.process_shared) madvise(p, reserve, MADV_NOHUGEPAGE);
  auto* base = static_cast<uint8_t*>(p);
  std::memset(base, 0, data_off);
  auto* c = new (base) ControlBlock();
  c->magic = kArenaMagic;
  c->version = kArenaVersion;
  c->num_workers = g.num_workers;
  c->max_slots = g.max_slots;
  c->reserve_bytes = reserve;
  c->max_memory = max_memory;
  c->epoch.store(-1, std::memory_order_relaxed);
  c->loader_id = (static_cast<uint64_t>(getpid()) << 40) ^ reinterpret_cast<uintptr_t>(base) ^
                 static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  c->workers_offset = workers_off;
  c->slots_offset = slots_off;
  c->data_offset = data_off;
  c->committed_bytes.store(data_off, std::memory_order_release);
  return std::shared_ptr<Arena>(new Arena(std::move(fd), base, reserve));
}

Result<std::shared_ptr<Arena>> Arena::Attach(int fd_in) {
  UniqueFd fd(fcntl(fd_in, F_DUPFD_CLOEXEC, 0));
  if (!fd.valid()) return Status::IOError("dup of arena fd " + std::to_string(fd_in), errno);
  ControlBlock head;
  if (pread(fd.get(), &head, sizeof(head), 0) != static_cast<ssize_t>(sizeof(head)))
    return Status::IOError("reading the arena header from fd " + std::to_string(fd_in), errno ? errno : EIO);
  if (head.magic != kArenaMagic || head.version != kArenaVersion)
    return Status::InvalidArgument("fd " + std::to_string(fd_in) + " is not a stoker arena of version " +
                                   std::to_string(kArenaVersion));
  void* p = mmap(nullptr, head.reserve_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd.get(), 0);
  if (p == MAP_FAILED)
    return Status::IOError("mmap of " + std::to_string(head.reserve_bytes) + " bytes for the slot arena", errno);
  return std::shared_ptr<Arena>(new Arena(std::move(fd), static_cast<uint8_t*>(p), head.reserve_bytes));
}

Arena::~Arena() { munmap(base_, reserve_); }

uint64_t Arena::ResidentBytes() const {
  if (!process_shared()) {
    // Pages below the committed mark that are in memory (nothing above it is
    // ever touched).
    const uint64_t pages = (committed_bytes() + kPageSize - 1) / kPageSize;
    std::vector<unsigned char> in(static_cast<size_t>(pages));
    if (pages == 0 || mincore(base_, pages * kPageSize, in.data()) != 0) return 0;
    uint64_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n * kPageSize;
  }
  struct stat st {};
  if (fstat(fd_.get(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

Status Arena::Grow(uint64_t new_size) {
  const uint64_t old = committed_bytes();
  if (new_size <= old) return Status::OK();
  if (new_size > reserve_)
    return Status::ResourceExhausted("arena would grow to " + std::to_string(new_size) +
                                     " bytes, past its reserved " + std::to_string(reserve_) + " bytes");
  if (process_shared() && ftruncate(fd_.get(), static_cast<off_t>(new_size)) != 0)
    return Status::IOError("ftruncate of the slot arena to " + std::to_string(new_size) + " bytes", errno);
  control()->committed_bytes.store(new_size, std::memory_order_release);
  return Status::OK();
}

Status Arena::Populate(uint64_t offset, uint64_t len) {
  if (len == 0) return Status::OK();
  if (madvise(base_ + offset, len, MADV_POPULATE_WRITE) == 0) return Status::OK();
  if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON) {
    // Give back what was faulted in; the range stays valid (zeros).
    (void)Discard(offset, len);
    return Status::ResourceExhausted(
        "could not back " + std::to_string(len) + " bytes of shared memory for a batch: the machine (or this "
        "process's cgroup) is out of memory; lower max_memory or batch_size, or free memory");
  }
  // EINVAL on kernels without MADV_POPULATE_WRITE (< 5.14): touch the pages.
  for (uint64_t o = offset; o < offset + len; o += kPageSize)
    reinterpret_cast<volatile uint8_t*>(base_)[o] = 0;
  return Status::OK();
}

Status Arena::Discard(uint64_t offset, uint64_t len) {
  if (len == 0) return Status::OK();
  if (!process_shared()) {
    if (madvise(base_ + offset, len, MADV_DONTNEED) != 0)
      return Status::IOError("madvise(DONTNEED) in the slot arena", errno);
    return Status::OK();
  }
  if (fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                static_cast<off_t>(len)) != 0)
    return Status::IOError("fallocate(PUNCH_HOLE) in the slot arena", errno);
  return Status::OK();
}

bool Arena::Contains(const void* p, uint64_t len) const {
  auto* q = static_cast<const uint8_t*>(p);
  return q >= base_ && q + len <= base_ + committed_bytes();
}

}  // namespace stoker
