#include "stoker/shared_lock.h"

#include "shared/robust_mutex.h"
#include "shared/shared_block.h"
#include "shared/shared_layouts.h"

namespace stoker {

namespace {
LockLayout* Layout(const SharedBlock& b) { return reinterpret_cast<LockLayout*>(b.data()); }
}  // namespace

SharedLock::SharedLock(std::shared_ptr<SharedBlock> b) : block_(std::move(b)) {}

Result<std::shared_ptr<SharedLock>> SharedLock::Create() {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<SharedBlock> b, SharedBlock::Create(sizeof(LockLayout), "stoker-lock"));
  LockLayout* l = new (b->data()) LockLayout();
  STOKER_RETURN_IF_ERROR(InitRobustMutex(&l->mutex, /*recursive=*/true));
  l->magic = kLockMagic;
  return std::shared_ptr<SharedLock>(new SharedLock(std::move(b)));
}

Result<std::shared_ptr<SharedLock>> SharedLock::Open(std::shared_ptr<SharedBlock> block) {
  if (block->size() < sizeof(LockLayout) || Layout(*block)->magic != kLockMagic || block->sealed())
    return Status::InvalidArgument("shared block is not a stoker lock");
  return std::shared_ptr<SharedLock>(new SharedLock(std::move(block)));
}

Status SharedLock::Lock(int64_t timeout_ns, bool* owner_died) {
  bool died = false;
  Status st = LockRobustMutex(&Layout(*block_)->mutex, timeout_ns, &died);
  if (st.ok() && died) Layout(*block_)->owner_deaths.fetch_add(1, std::memory_order_relaxed);
  if (owner_died) *owner_died = died;
  return st;
}

bool SharedLock::TryLock(bool* owner_died) { return Lock(0, owner_died).ok(); }

Status SharedLock::Unlock() { return UnlockRobustMutex(&Layout(*block_)->mutex); }

uint64_t SharedLock::owner_deaths() const {
  return Layout(*block_)->owner_deaths.load(std::memory_order_relaxed);
}

}  // namespace stoker
