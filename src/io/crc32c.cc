#include "io/crc32c.h"

#include "core/copy.h"
#include "core/cpu_features.h"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif
#include <dlfcn.h>

namespace stoker {

namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

// kTable[k][b]: CRC of byte b followed by k zero bytes (slicing-by-8).
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};
constexpr Tables kTables;

uint32_t SoftwareExtend(uint32_t crc, const uint8_t* p, size_t n) {
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
        t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

// Multiplication in GF(2)[x] mod the polynomial, for combining streams:
// x^(8*len) applied to a CRC state, as a 32x32 matrix over GF(2) built once
// per stream length.  Streams are long (kStream bytes), so shifting costs
// nothing next to the data.
uint32_t GfMultiply(uint32_t a, uint32_t b) {  // both reflected
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {
    if (a & 0x80000000u) r ^= b;
    a <<= 1;
    b = (b >> 1) ^ ((b & 1) ? kPoly : 0);
  }
  return r;
}

// x^(8n) mod P in reflected form.
uint32_t XPow8N(uint64_t n) {
  uint32_t result = 0x80000000u;  // x^0
  uint32_t p = 0x00800000u;       // x^8
  while (n) {
    if (n & 1) result = GfMultiply(result, p);
    p = GfMultiply(p, p);
    n >>= 1;
  }
  return result;
}

#if defined(__x86_64__)
constexpr size_t kStream = 8192;  // bytes per stream per round (3 streams)

// (clang 16 and later count crc32 apart from sse4.2)
__attribute__((target("sse4.2,crc32"))) uint32_t HardwareExtend(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c0 = ~crc;
  // Byte-align to 8.
  while (n && (reinterpret_cast<uintptr_t>(p) & 7)) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  if (n >= 3 * kStream) {
    static const uint32_t kShift = XPow8N(kStream);  // moves a CRC state past kStream bytes
    while (n >= 3 * kStream) {
      uint64_t c1 = 0, c2 = 0;
      const uint8_t* a = p;
      const uint8_t* b = p + kStream;
      const uint8_t* d = p + 2 * kStream;
      for (size_t i = 0; i < kStream; i += 8) {
        uint64_t va, vb, vd;
        std::memcpy(&va, a + i, 8);
        std::memcpy(&vb, b + i, 8);
        std::memcpy(&vd, d + i, 8);
        c0 = _mm_crc32_u64(c0, va);
        c1 = _mm_crc32_u64(c1, vb);
        c2 = _mm_crc32_u64(c2, vd);
      }
      // state(a|b|d) = shift(shift(c0) ^ c1) ^ c2, with c1, c2 started from 0
      // (the ~ pre/post conditioning belongs to c0 only).
      uint32_t s = GfMultiply(static_cast<uint32_t>(c0), kShift) ^ static_cast<uint32_t>(c1);
      s = GfMultiply(s, kShift) ^ static_cast<uint32_t>(c2);
      c0 = s;
      p += 3 * kStream;
      n -= 3 * kStream;
    }
  }
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c0 = _mm_crc32_u64(c0, v);
    p += 8;
    n -= 8;
  }
  while (n--) c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
  return ~static_cast<uint32_t>(c0);
}

const bool kHaveSse42 = Cpu().sse42;
#endif

// ISA-L's crc32_iscsi (isa-l/crc.h), from the system's libisal.so.2 where
// it is installed (Debian: libisal2; RHEL: isa-l), loaded at first use
// rather than linked: the core needs no library beyond the C++ runtime, and
// a program or wheel built anywhere uses ISA-L where the machine has it.
using IsalCrc = unsigned int (*)(unsigned char* buffer, int len, unsigned int init_crc);

IsalCrc Isal() {
  static const IsalCrc fn = []() -> IsalCrc {
    void* lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);  // (kept open: the process's lifetime)
    return lib ? reinterpret_cast<IsalCrc>(dlsym(lib, "crc32_iscsi")) : nullptr;
  }();
  return fn;
}

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  const IsalCrc isal = Isal();
  if (!isal) return Crc32cOwnExtend(crc, p, n);
  // crc32_iscsi keeps the register un-inverted and takes an int length.
  constexpr size_t kMax = size_t{1} << 30;
  uint32_t r = ~crc;
  for (; n > kMax; n -= kMax, p += kMax) r = isal(const_cast<uint8_t*>(p), static_cast<int>(kMax), r);
  return ~isal(const_cast<uint8_t*>(p), static_cast<int>(n), r);
}

uint32_t Crc32cSoftwareExtend(uint32_t crc, const void* data, size_t n) {
  return SoftwareExtend(crc, static_cast<const uint8_t*>(data), n);
}

uint32_t Crc32cOwnExtend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (kHaveSse42) return HardwareExtend(crc, static_cast<const uint8_t*>(data), n);
#endif
  return SoftwareExtend(crc, static_cast<const uint8_t*>(data), n);
}

void Crc32cCursor::AdvanceTo(const uint8_t* p) {
  if (p > at_) {
    crc_ = Crc32cExtend(crc_, at_, static_cast<size_t>(p - at_));
    at_ = p;
  }
}

void Crc32cCursor::Copy(uint8_t* dst, const uint8_t* src, size_t n) {
  constexpr size_t kPiece = 64 << 10;  // stays in L2 between the checksum and the copy
  if (src < at_ || src > end_) {  // already counted (or not ours): copy only
    CollateCopy(dst, src, n);
    return;
  }
  AdvanceTo(src);
  for (size_t done = 0; done < n; done += kPiece) {
    const size_t k = std::min(kPiece, n - done);
    crc_ = Crc32cExtend(crc_, src + done, k);
    CollateCopy(dst + done, src + done, k);
  }
  at_ = src + n;
}

uint32_t Crc32cCursor::Finish() {
  AdvanceTo(end_);
  return crc_;
}

bool Crc32cIsHardware() {
  if (Isal()) return true;  // (its own dispatch: a table only on CPUs without crc32 or pclmul)
#if defined(__x86_64__)
  return kHaveSse42;
#else
  return false;
#endif
}

const char* Crc32cImplementation() {
  if (Isal()) return "isa-l";
  return Crc32cIsHardware() ? "sse4.2" : "table";
}

}  // namespace stoker
