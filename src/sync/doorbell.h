// Doorbell: a futex-backed "something changed" signal in shared memory.
//
// Process safety and invariants: the layout is two 32-bit atomics, so a
// process killed at any instruction leaves each word either old or new.
// `seq` only ever increases (mod 2^32); every Ring() bumps it before
// checking `sleepers`, and every sleeper registers in `sleepers` before
// reading `seq`.  With both sides sequentially consistent, either the ringer
// sees the sleeper and wakes it, or the sleeper sees the new `seq` and does
// not sleep: no wake-up is ever lost.  A sleeper that dies leaves `sleepers`
// too high, which only costs spare FUTEX_WAKE calls.
#ifndef STOKER_SYNC_DOORBELL_H_
#define STOKER_SYNC_DOORBELL_H_

#include <atomic>
#include <errno.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "sync/futex.h"

namespace stoker {

struct DoorbellLayout {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;
};
static_assert(sizeof(DoorbellLayout) == 8);

class Doorbell {
 public:
  explicit Doorbell(DoorbellLayout* l) : l_(l) {}

  // Signals every current and future waiter that state changed.
  void Ring() {
    l_->seq.fetch_add(1, std::memory_order_seq_cst);
    if (l_->sleepers.load(std::memory_order_seq_cst) != 0) FutexWake(&l_->seq, INT_MAX);
  }

  // Waits until ready() is true or timeout_ns passes (timeout_ns < 0: no
  // limit).  Returns ready()'s last value.  `ready` must read the shared state
  // it depends on with acquire (or stronger) loads.  If `interrupted` is
  // given, a signal delivered during the sleep ends the wait early and sets
  // *interrupted (so the caller can run signal handlers); otherwise the wait
  // resumes.
  template <typename Pred>
  bool WaitUntil(Pred&& ready, int64_t timeout_ns, bool* interrupted = nullptr) {
    if (ready()) return true;
    for (int i = 0; i < kSpins; ++i) {
      Pause();
      if (ready()) return true;
    }
    const int64_t now = MonotonicNanos();
    const int64_t deadline = timeout_ns < 0 ? -1 : now + timeout_ns;
    // Then yield the CPU for a short while before sleeping: a peer that is
    // about to answer (a worker finishing a tiny batch) usually does so within
    // microseconds, and a futex sleep/wake pair costs more than that.
    const int64_t yield_until = now + std::min<int64_t>(kYieldNanos, timeout_ns < 0 ? kYieldNanos : timeout_ns);
    while (MonotonicNanos() < yield_until) {
      sched_yield();
      if (ready()) return true;
    }
    for (;;) {
      l_->sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t token = l_->seq.load(std::memory_order_seq_cst);
      if (ready()) {
        l_->sleepers.fetch_sub(1, std::memory_order_relaxed);
        return true;
      }
      int64_t left = -1;
      if (deadline >= 0) {
        left = deadline - MonotonicNanos();
        if (left <= 0) {
          l_->sleepers.fetch_sub(1, std::memory_order_relaxed);
          return ready();
        }
      }
      const int rc = FutexWait(&l_->seq, token, left);
      l_->sleepers.fetch_sub(1, std::memory_order_relaxed);
      if (ready()) return true;
      if (rc == EINTR && interrupted) {
        *interrupted = true;
        return false;
      }
    }
  }

 private:
  static constexpr int kSpins = 64;
  static constexpr int64_t kYieldNanos = 50 * 1000;
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  DoorbellLayout* l_;
};

}  // namespace stoker

#endif  // STOKER_SYNC_DOORBELL_H_
