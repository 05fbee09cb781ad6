// Arena: one memfd-backed shared mapping holding a loader's control block,
// worker rings, slot headers and the region heap that batches are written to.
//
// Nothing is named in /dev/shm: the memory lives as long as some process
// holds the fd or a mapping, so a SIGKILL leaves no residue.  Every process
// maps the full `reserve_bytes` range once; the main process grows the file
// (Grow) as it hands out regions, and the new pages become visible through
// the existing mappings of every process, so workers never remap.  Touching
// bytes beyond the committed size raises SIGBUS, which is why only the main
// process hands out offsets, and only below committed_bytes.
//
// A loader whose readers are threads of its own process (native datasets)
// shares the arena with no one: ArenaGeometry::process_shared = false gives
// it private anonymous memory instead, quicker to back than tmpfs pages
// (paid for each region of every new loader iterator; docs/benchmarks.md,
// bench/epoch_start.py).  It has no fd and cannot be attached.
// It takes no transparent huge pages: a huge page would back memory around a
// region that max_memory does not count.
//
// Thread safety: Create/Attach return independent objects; Grow must be
// called from one thread at a time (the Engine's lock).
#ifndef STOKER_SHM_ARENA_H_
#define STOKER_SHM_ARENA_H_

#include <cstdint>
#include <memory>

#include "core/unique_fd.h"
#include "shm/arena_layout.h"
#include "stoker/status.h"

namespace stoker {

struct ArenaGeometry {
  uint32_t num_workers = 0;
  uint32_t max_slots = 0;
  uint64_t reserve_bytes = 0;  // address space mapped by every process (the file's size bound)
  uint64_t max_memory = 0;     // resident-bytes budget of the whole file (0: reserve_bytes)
  bool process_shared = true;  // false: private memory, for readers that are threads of this process
};

// Smallest region heap an arena accepts (two minimum regions).
inline constexpr uint64_t kMinDataBytes = 128 * 1024;

class Arena {
 public:
  // Creates a new arena (main process).  The control area is committed and
  // initialised; the region heap starts empty.
  static Result<std::shared_ptr<Arena>> Create(const ArenaGeometry& g);
  // Maps an existing shared arena from an fd (a worker).  The fd is duplicated.
  static Result<std::shared_ptr<Arena>> Attach(int fd);

  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint8_t* base() const { return base_; }
  int fd() const { return fd_.get(); }  // -1 for a private arena
  bool process_shared() const { return fd_.valid(); }
  ControlBlock* control() const { return reinterpret_cast<ControlBlock*>(base_); }
  WorkerBlock* worker(uint32_t i) const {
    return reinterpret_cast<WorkerBlock*>(base_ + control()->workers_offset) + i;
  }
  SlotHeader* slot(uint32_t i) const {
    return reinterpret_cast<SlotHeader*>(base_ + control()->slots_offset) + i;
  }
  uint64_t reserve_bytes() const { return reserve_; }
  uint64_t committed_bytes() const {
    return control()->committed_bytes.load(std::memory_order_acquire);
  }
  // Memory the arena really holds (a shared arena: its file's tmpfs pages,
  // holes free, counted in the system's Shmem; a private one: its resident
  // pages): what counts against max_memory.
  uint64_t ResidentBytes() const;
  // Main process only: makes the arena at least new_size bytes (never
  // shrinks; a private arena only moves its committed mark).
  Status Grow(uint64_t new_size);
  // Backs [offset, offset+len) with memory now, so no process ever faults
  // on it later (a failed fault in shared memory is a SIGBUS; here it is a
  // ResourceExhausted status).  Any process of the loader may call it (the
  // one that writes a region backs it: WorkerPort::Reserve).
  Status Populate(uint64_t offset, uint64_t len);
  // Returns the physical pages of [offset, offset+len) to the kernel while
  // keeping the range valid (it reads as zeros afterwards).
  Status Discard(uint64_t offset, uint64_t len);
  // True when [p, p+len) lies inside the committed part of this mapping.
  bool Contains(const void* p, uint64_t len) const;

 private:
  Arena(UniqueFd fd, uint8_t* base, uint64_t reserve) : fd_(std::move(fd)), base_(base), reserve_(reserve) {}
  UniqueFd fd_;
  uint8_t* base_;
  uint64_t reserve_;
};

inline uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace stoker

#endif  // STOKER_SHM_ARENA_H_
