// CollateCopy: the copy of a sample's bytes into a batch (the slot pool).
// Large copies (64 KiB and up) use non-temporal stores: the batch is read
// later by another process (the training loop), not by this core, so pulling
// its lines into this core's cache first (what a plain memcpy's stores do)
// only costs memory traffic and evicts the source (measured in
// docs/benchmarks.md).  Smaller copies are a plain memcpy.  The streaming
// cache's fetchers copy out of libcurl's buffer with it for the same reason:
// a reader thread reads the shard once all of it is in.
#ifndef STOKER_COLLATE_COLLATE_COPY_H_
#define STOKER_COLLATE_COLLATE_COPY_H_

#include <cstddef>

namespace stoker {

inline constexpr size_t kCollateCopyStreamingMin = 64 << 10;

void CollateCopy(void* dst, const void* src, size_t n);

}  // namespace stoker

#endif  // STOKER_COLLATE_COLLATE_COPY_H_
