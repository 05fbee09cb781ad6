// collate/collate_copy: every byte at any alignment and size.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collate/collate_copy.h"

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

}  // namespace
}  // namespace stoker
