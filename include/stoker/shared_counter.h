// stoker::SharedCounter: a 64-bit integer that every process sharing it
// updates atomically (lock-free; no lock to lose when a process dies).
#ifndef STOKER_SHARED_COUNTER_H_
#define STOKER_SHARED_COUNTER_H_

#include <cstdint>
#include <memory>

#include "stoker/status.h"

namespace stoker {

class SharedBlock;

class SharedCounter {
 public:
  static Result<std::shared_ptr<SharedCounter>> Create(int64_t initial);
  static Result<std::shared_ptr<SharedCounter>> Open(std::shared_ptr<SharedBlock> block);

  int64_t Load() const;
  void Store(int64_t v);
  // Each returns the value after the operation.
  int64_t Add(int64_t delta);
  // Returns the previous value.
  int64_t Exchange(int64_t v);
  // If the value is `expected`, makes it `desired` and returns true; else
  // returns false and sets *expected to the current value.
  bool CompareExchange(int64_t* expected, int64_t desired);

  const std::shared_ptr<SharedBlock>& block() const { return block_; }

 private:
  explicit SharedCounter(std::shared_ptr<SharedBlock> b) : block_(std::move(b)) {}
  std::shared_ptr<SharedBlock> block_;
};

}  // namespace stoker

#endif  // STOKER_SHARED_COUNTER_H_
