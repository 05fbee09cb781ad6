// WaitInSlices: a blocking wait that Ctrl-C can end.  The wait is cut into
// slices, and Python's signal handlers run between them (e.g.
// KeyboardInterrupt).  A signal that lands just before a wait begins (the
// GIL let go, the futex not yet asleep), or one that does not interrupt the
// wait at all (a robust mutex's goes on through signals), is then seen
// within a slice instead of when the wait ends: for a lock never let go, or
// a worker that never answers, that was never.
//
// REQUIRES: the GIL (the waits themselves let it go as they need).
#ifndef STOKER_GLUE_SIGNAL_SLICES_H_
#define STOKER_GLUE_SIGNAL_SLICES_H_

#include <Python.h>

#include <algorithm>
#include <cstdint>

#include "sync/futex.h"  // MonotonicNanos

namespace stoker::glue {

// How long one slice waits before Python's signal handlers run.
inline constexpr int64_t kSignalCheckNs = 100'000'000;

// How a slice of the wait ended.
enum class SliceEnd { kDone, kTimedOut, kInterrupted };

// Calls wait(slice_ns) until it is done, or times out with the whole
// timeout_ns (< 0: none) spent; each slice at most kSignalCheckNs.  Runs
// Python's signal handlers after every slice that ended otherwise.
// Returns false when a handler raised (its Python error is set).
template <class Wait>
bool WaitInSlices(int64_t timeout_ns, Wait&& wait) {
  const int64_t deadline = timeout_ns < 0 ? -1 : MonotonicNanos() + timeout_ns;
  for (;;) {
    const int64_t left = deadline < 0 ? -1 : std::max<int64_t>(0, deadline - MonotonicNanos());
    const bool last = left >= 0 && left <= kSignalCheckNs;  // (this slice ends the timeout)
    const SliceEnd end = wait(last ? left : kSignalCheckNs);
    if (end == SliceEnd::kDone || (end == SliceEnd::kTimedOut && last)) return true;
    if (PyErr_CheckSignals() != 0) return false;
  }
}

}  // namespace stoker::glue

#endif  // STOKER_GLUE_SIGNAL_SLICES_H_
