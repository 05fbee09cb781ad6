// io/crc32c: known vectors, every implementation, the cursor.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/crc32c.h"

namespace stoker {
namespace {

TEST(Crc32c, KnownVectorsAndEveryImplementationAgrees) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32cOwnExtend(0, "123456789", 9), 0xe3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8a9136aau);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62a8ab43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46dd794eu);
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(200000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len : {0ul, 1ul, 7ul, 8ul, 63ul, 24575ul, 24576ul, 24577ul, 73729ul, 199990ul}) {
    const size_t off = rng() % 9;
    EXPECT_EQ(Crc32c(buf.data() + off, len), Crc32cSoftwareExtend(0, buf.data() + off, len)) << len;
    EXPECT_EQ(Crc32cOwnExtend(0, buf.data() + off, len), Crc32cSoftwareExtend(0, buf.data() + off, len)) << len;
    // Extending in two pieces is the same as one.
    const size_t cut = len / 3;
    EXPECT_EQ(Crc32cExtend(Crc32c(buf.data() + off, cut), buf.data() + off + cut, len - cut),
              Crc32c(buf.data() + off, len));
    EXPECT_EQ(Crc32cOwnExtend(Crc32c(buf.data() + off, cut), buf.data() + off + cut, len - cut),
              Crc32c(buf.data() + off, len));
  }
  // ISA-L where this machine has it (loaded at run time, not linked).
  if (void* lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_STREQ(Crc32cImplementation(), "isa-l");
    dlclose(lib);
  }
}

TEST(Crc32c, CursorCountsEveryByteOnceInOrder) {
  std::mt19937_64 rng(3);
  std::vector<uint8_t> buf(300000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t want = Crc32c(buf.data(), buf.size());
  for (int trial = 0; trial < 20; ++trial) {
    Crc32cCursor c(buf.data(), buf.data() + buf.size());
    std::vector<uint8_t> out(buf.size());
    // Copies of random spans, some behind the cursor, some overlapping it.
    for (int k = 0; k < 8; ++k) {
      const size_t a = rng() % buf.size(), n = rng() % (buf.size() - a);
      c.Copy(out.data() + a, buf.data() + a, n);
      EXPECT_EQ(std::memcmp(out.data() + a, buf.data() + a, n), 0);
    }
    EXPECT_EQ(c.Finish(), want);
  }
}

}  // namespace
}  // namespace stoker
