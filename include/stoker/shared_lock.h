// stoker::SharedLock: a lock for processes that share memory (loader
// workers and the main process), reentrant and robust.
//
//   auto lock = stoker::SharedLock::Create().value();   // main process
//   // ... fork, or pass lock->fd() to another process and Open() it ...
//   bool owner_died = false;
//   STOKER_RETURN_IF_ERROR(lock->Lock(-1, &owner_died));
//   if (owner_died) RepairWhatItGuards();   // its holder died mid-update
//   lock->Unlock();
//
// Reentrant: the thread that holds it may lock it again (unlock as often).
// Robust: if the holder dies (even SIGKILL), the next Lock() gets it and is
// told so; the lock stays usable.  Backed by a process-shared robust
// recursive pthread mutex in a SharedBlock.
#ifndef STOKER_SHARED_LOCK_H_
#define STOKER_SHARED_LOCK_H_

#include <cstdint>
#include <memory>

#include "stoker/status.h"

namespace stoker {

class SharedBlock;

class SharedLock {
 public:
  static Result<std::shared_ptr<SharedLock>> Create();
  // The lock in `block` (made by Create, in this or another process).
  static Result<std::shared_ptr<SharedLock>> Open(std::shared_ptr<SharedBlock> block);

  // Waits up to timeout_ns (< 0: forever).  Timeout when it passed.
  // *owner_died (may be null) is set when the previous holder died holding it.
  Status Lock(int64_t timeout_ns, bool* owner_died);
  // False when another thread holds it (or its holder died: then it is
  // taken and *owner_died set, like Lock).
  bool TryLock(bool* owner_died);
  // REQUIRES: this thread holds it.
  Status Unlock();

  // How many times a holder died holding it, over its whole life.
  uint64_t owner_deaths() const;
  const std::shared_ptr<SharedBlock>& block() const { return block_; }

 private:
  explicit SharedLock(std::shared_ptr<SharedBlock> b);
  std::shared_ptr<SharedBlock> block_;
};

}  // namespace stoker

#endif  // STOKER_SHARED_LOCK_H_
