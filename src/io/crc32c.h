// CRC-32C (Castagnoli), the checksum of TFRecord files and of the streaming
// cache's shards.  Where the system has ISA-L (libisal.so.2, loaded at first
// use; Debian: libisal2), its crc32_iscsi: carry-less multiplication folding
// 64 bytes a step with AVX-512 where the CPU has it, well ahead of our own
// loop (docs/benchmarks.md).  Without ISA-L: the SSE4.2 crc32 instruction
// (three independent streams per call) when the CPU has it, a table otherwise.
#ifndef STOKER_IO_CRC32C_H_
#define STOKER_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace stoker {

// Continues `crc` (0 to start) over n bytes.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// TFRecord's masked form (the CRC rotated and offset, so that a CRC of data
// holding CRCs does not degenerate).
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// The table path alone, and our own loop (SSE4.2 where the CPU has it, else
// the table): Crc32cExtend without ISA-L.  Tests compare the three.
uint32_t Crc32cSoftwareExtend(uint32_t crc, const void* data, size_t n);
uint32_t Crc32cOwnExtend(uint32_t crc, const void* data, size_t n);

// CRC-32C of a buffer computed while it is being copied out of: Copy()
// checksums each piece while it is in the cache, just before copying it, and
// the rest (bytes nobody copies) is checksummed in order as the cursor moves
// past it.  Every byte of [begin, end) counts once, in order, whatever the
// order of the copies (bytes behind the cursor are copied without counting).
class Crc32cCursor {
 public:
  Crc32cCursor(const uint8_t* begin, const uint8_t* end) : at_(begin), end_(end) {}
  void Copy(uint8_t* dst, const uint8_t* src, size_t n);
  // The CRC of the whole buffer.
  uint32_t Finish();

 private:
  void AdvanceTo(const uint8_t* p);
  const uint8_t* at_;
  const uint8_t* end_;
  uint32_t crc_ = 0;
};

// Whether a hardware path is in use (for tests and benchmarks).
bool Crc32cIsHardware();
// Which implementation Crc32cExtend uses: "isa-l", "sse4.2" or "table".
const char* Crc32cImplementation();

}  // namespace stoker

#endif  // STOKER_IO_CRC32C_H_
