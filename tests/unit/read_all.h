// Every position of an IndexOrder, read at once (for the order tests).
#ifndef STOKER_TESTS_UNIT_READ_ALL_H_
#define STOKER_TESTS_UNIT_READ_ALL_H_

#include <gtest/gtest.h>

#include <vector>

#include "order/index_order.h"

namespace stoker::testing {

inline std::vector<int64_t> All(IndexOrder& o) {
  std::vector<int64_t> v(o.size());
  EXPECT_TRUE(o.Read(0, v.size(), v.data()).ok());
  return v;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_UNIT_READ_ALL_H_
