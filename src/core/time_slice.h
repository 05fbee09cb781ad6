// Asks the kernel's fair scheduler for short time slices for the calling
// thread.  For threads that wake up often, do a little work and sleep again
// (a fetcher woken for each 256 KiB that arrives on its socket): with a short
// slice EEVDF gives a woken thread an earlier deadline, so it runs ahead of
// the long-running threads on the same cores (the readers decoding records)
// instead of waiting behind them while its socket fills and the server
// stalls.  No privilege is needed and the nice value is kept.  Linux 6.12 and
// later honour it (sched_attr.sched_runtime for SCHED_OTHER); earlier kernels
// ignore it or refuse it, and either way the thread runs as before.
#ifndef STOKER_CORE_TIME_SLICE_H_
#define STOKER_CORE_TIME_SLICE_H_

#include <cstdint>

namespace stoker {

// True when the kernel took the request.
bool RequestTimeSlice(uint64_t nanoseconds);

// The slice fetcher threads ask for: the kernel's smallest (0.1 ms).
inline constexpr uint64_t kFetcherTimeSliceNs = 100'000;

}  // namespace stoker

#endif  // STOKER_CORE_TIME_SLICE_H_
