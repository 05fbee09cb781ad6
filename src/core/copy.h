// CollateCopy: the copy of a sample's bytes into a batch (the slot pool).
// Large copies (64 KiB and up) use non-temporal stores: the batch is read
// later by another process (the training loop), not by this core, so pulling
// its lines into this core's cache first (what a plain memcpy's stores do)
// only costs memory traffic and evicts the source (measured in
// docs/benchmarks.md).  Smaller copies are a plain memcpy.
// StreamCopy: non-temporal stores whatever the size, for the streaming
// cache's fetchers copying out of libcurl's buffer, for the same reason: a
// reader thread reads the shard once all of it is in.
#ifndef STOKER_CORE_COPY_H_
#define STOKER_CORE_COPY_H_

#include <cstddef>

namespace stoker {

inline constexpr size_t kCollateCopyStreamingMin = 64 << 10;

void CollateCopy(void* dst, const void* src, size_t n);

// Non-temporal stores whatever the size: whole cache lines of the
// destination, plain stores for the bytes before its first line boundary
// and after its last whole line (and a plain memcpy under 128 bytes).  For
// pieces appended to a buffer that this core will not read again, however
// small each piece is.  The streaming cache copies each of
// libcurl's writes (16 KiB, below CollateCopy's threshold) into a stream
// buffer with it; as a plain memcpy those copies read every destination
// line into the cache first and cost more than the socket's own copy
// (docs/benchmarks.md).  `stores`: which streaming stores copy the whole
// lines: kBest (32-byte AVX2 ones where the CPU has them, 8% faster from
// memory to memory here; else SSE2's 16-byte ones), or one named (tests;
// kAvx2 only where Cpu().avx2).
enum class StreamStores { kBest, kSse2, kAvx2 };
void StreamCopy(void* dst, const void* src, size_t n, StreamStores stores = StreamStores::kBest);

}  // namespace stoker

#endif  // STOKER_CORE_COPY_H_
