// SharedBlock: a block of shared memory that any process of the same user
// can map: an anonymous memfd, so nothing is created in /dev/shm, nothing is
// left behind when the last process holding it exits, and a small /dev/shm
// (Docker's 64 MB) does not limit it.
//
// A process gets a block by creating it, by inheriting it across fork, by
// receiving its fd (multiprocessing's fd passing under spawn/forkserver), or
// by opening /proc/<pid>/fd/<fd> of a process that holds it.
//
// A sealed block is read-only in every process, forever (memfd seals): its
// contents can be trusted not to change under a reader.
//
// Thread safety: the object is immutable after Create/Open/Seal.
#ifndef STOKER_SHARED_SHARED_BLOCK_H_
#define STOKER_SHARED_SHARED_BLOCK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/unique_fd.h"
#include "stoker/status.h"

namespace stoker {

class SharedBlock {
 public:
  // A zero-filled, writable block of `size` bytes (> 0), backed at once
  // (ResourceExhausted when memory cannot be had, rather than a SIGBUS on
  // first touch).  `name` shows in /proc/<pid>/maps as memfd:<name>.
  static Result<std::shared_ptr<SharedBlock>> Create(uint64_t size, const std::string& name);
  // Maps the block behind `fd` (duplicated; the caller keeps its fd).
  static Result<std::shared_ptr<SharedBlock>> Open(int fd);
  // Maps the block behind a path such as /proc/<pid>/fd/<fd>.
  static Result<std::shared_ptr<SharedBlock>> OpenPath(const std::string& path);

  ~SharedBlock();
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;

  // Makes the block read-only for good, in every process.  REQUIRES: no
  // other process maps it writable (call right after filling it).  The
  // mapping moves: data() changes.
  Status Seal();

  uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  bool sealed() const { return sealed_; }

 private:
  SharedBlock(UniqueFd fd, uint8_t* base, uint64_t size, bool sealed)
      : fd_(std::move(fd)), base_(base), size_(size), sealed_(sealed) {}
  static Result<std::shared_ptr<SharedBlock>> Map(UniqueFd fd, const std::string& what);

  UniqueFd fd_;
  uint8_t* base_;
  uint64_t size_;
  bool sealed_;
};

}  // namespace stoker

#endif  // STOKER_SHARED_SHARED_BLOCK_H_
