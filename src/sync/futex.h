// Futex wait/wake on 32-bit words that may live in memory shared between
// processes (never FUTEX_PRIVATE_FLAG).
//
// Process safety: a futex word is any naturally aligned std::atomic<uint32_t>
// in a MAP_SHARED mapping.  Waiters must re-check their condition after every
// return: wake-ups may be spurious, and FutexWait returns at once when the
// word no longer holds `expected` (which is how lost wake-ups are avoided).
#ifndef STOKER_SYNC_FUTEX_H_
#define STOKER_SYNC_FUTEX_H_

#include <atomic>
#include <cstdint>

namespace stoker {

// Sleeps while *word == expected, at most timeout_ns nanoseconds
// (timeout_ns < 0: no limit).  Returns 0 when woken (or on a spurious
// wake-up), EAGAIN when the word differed, ETIMEDOUT, or EINTR.
int FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);

// Wakes up to `count` waiters of `word`; returns how many were woken.
int FutexWake(std::atomic<uint32_t>* word, int count);

// Monotonic clock in nanoseconds.
int64_t MonotonicNanos();

}  // namespace stoker

#endif  // STOKER_SYNC_FUTEX_H_
