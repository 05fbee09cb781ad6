// core/copy: every byte at any alignment and size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/copy.h"
#include "core/cpu_features.h"

namespace stoker {
namespace {

TEST(CollateCopy, CopiesEveryByteAtAnyAlignmentAndSize) {
  std::mt19937_64 rng(11);
  std::vector<uint8_t> src(kCollateCopyStreamingMin * 3 + 200);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  const size_t t = kCollateCopyStreamingMin;
  for (size_t len : {size_t{0}, size_t{1}, size_t{63}, t - 1, t, t + 1, t + 63, t + 64, 2 * t + 17, 3 * t}) {
    for (size_t so : {0, 1, 9}) {
      for (size_t dof : {0, 3, 16}) {
        std::vector<uint8_t> dst(len + 64, 0xAB);
        CollateCopy(dst.data() + dof, src.data() + so, len);
        ASSERT_EQ(0, std::memcmp(dst.data() + dof, src.data() + so, len)) << len << " " << so << " " << dof;
        for (size_t i = 0; i < dof; ++i) ASSERT_EQ(dst[i], 0xAB) << "wrote before the destination";
        for (size_t i = dof + len; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "wrote past the destination";
      }
    }
  }
}

// StreamCopy streams whole cache lines of the destination from any size of
// 128 bytes up, with plain stores before the first line boundary and after
// the last whole line: every byte lands, none outside, at each offset of the
// destination within a line.
// Each kind of streaming store this CPU has (AVX2's where it has them).
std::vector<StreamStores> KindsHere() {
  std::vector<StreamStores> kinds = {StreamStores::kBest, StreamStores::kSse2};
  if (Cpu().avx2) kinds.push_back(StreamStores::kAvx2);
  return kinds;
}

TEST(StreamCopy, CopiesEveryByteAtEachOffsetWithinALine) {
  std::mt19937_64 rng(12);
  std::vector<uint8_t> src((64 << 10) + 300);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> storage(src.size() + 256);
  uint8_t* base = storage.data() + ((64 - (reinterpret_cast<uintptr_t>(storage.data()) & 63)) & 63);
  const std::vector<size_t> lens = {0, 1, 63, 64, 127, 128, 129, 191, 192, 16 << 10, (16 << 10) + 13, 64 << 10};
  for (StreamStores kind : KindsHere()) {
    for (size_t len : lens) {
      for (size_t so : {0, 1, 9}) {
        for (size_t dof : {0, 1, 15, 16, 48, 63, 64}) {
          std::fill(storage.begin(), storage.end(), 0xAB);
          StreamCopy(base + dof, src.data() + so, len, kind);
          ASSERT_EQ(0, std::memcmp(base + dof, src.data() + so, len))
              << len << " " << so << " " << dof << " kind " << static_cast<int>(kind);
          for (uint8_t* q = storage.data(); q < base + dof; ++q) ASSERT_EQ(*q, 0xAB) << "wrote before the destination";
          for (uint8_t* q = base + dof + len; q < storage.data() + storage.size(); ++q)
            ASSERT_EQ(*q, 0xAB) << "wrote past the destination";
        }
      }
    }
  }
}

// Pieces appended one after another, as libcurl hands over a response (a
// short first piece after the headers, then 16 KiB each), make the whole.
TEST(StreamCopy, PiecesAppendedInTurnMakeTheWhole) {
  std::mt19937_64 rng(13);
  std::vector<uint8_t> src((1 << 20) + 77), dst(src.size(), 0);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  for (StreamStores kind : KindsHere()) {
    std::fill(dst.begin(), dst.end(), 0);
    size_t at = 0;
    for (size_t piece = 16384 - 211; at < src.size(); piece = 16384) {
      const size_t k = std::min(piece, src.size() - at);
      StreamCopy(dst.data() + at, src.data() + at, k, kind);
      at += k;
    }
    EXPECT_EQ(src, dst) << "kind " << static_cast<int>(kind);
  }
}

}  // namespace
}  // namespace stoker
