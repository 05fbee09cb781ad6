// order/index_order: a vector's order, and a rank's part padded or cut as
// torch's DistributedSampler makes it.
#include "order/index_order.h"

#include <gtest/gtest.h>

#include <vector>

namespace stoker {
namespace {

std::vector<int64_t> All(IndexOrder& o) {
  std::vector<int64_t> v(o.size());
  EXPECT_TRUE(o.Read(0, v.size(), v.data()).ok());
  return v;
}

TEST(IndexOrder, RanksTakeEveryWorldthPlacePaddedOrCut) {
  auto base = std::make_shared<VectorOrder>(std::vector<int64_t>{10, 11, 12, 13, 14});
  StridedRankOrder r1(base, 6, 1, 3);  // padded to 6: 10 11 12 13 14 10
  EXPECT_EQ(All(r1), (std::vector<int64_t>{11, 14}));
  StridedRankOrder r2(base, 6, 2, 3);
  EXPECT_EQ(All(r2), (std::vector<int64_t>{12, 10}));
  StridedRankOrder big(base, 12, 0, 2);  // more than twice: repeats cyclically
  EXPECT_EQ(All(big), (std::vector<int64_t>{10, 12, 14, 11, 13, 10}));
  StridedRankOrder cut(base, 4, 1, 2);  // drop_last: 4 places
  EXPECT_EQ(All(cut), (std::vector<int64_t>{11, 13}));
  int64_t x;
  EXPECT_FALSE(cut.Read(2, 1, &x).ok());
  EXPECT_FALSE(base->Read(4, 2, &x).ok());
}

}  // namespace
}  // namespace stoker
