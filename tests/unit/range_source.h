// RangeSource: an IndexSource over 0..n-1 in tasks of `batch` int64 indices
// (token = first index + 1), counting the tokens it is told to drop.
#ifndef STOKER_TESTS_RANGE_SOURCE_H_
#define STOKER_TESTS_RANGE_SOURCE_H_

#include <cstdint>

#include "loader/scheduler.h"

namespace stoker::testing {

class RangeSource : public IndexSource {
 public:
  explicit RangeSource(int n, int batch = 1) : n_(n), batch_(batch) {}
  Result<bool> Next(TaskSpec* spec) override {
    if (i_ >= n_) return false;
    spec->kind = TaskKind::kIndices;
    spec->payload.clear();
    spec->token = static_cast<uint64_t>(i_) + 1;
    for (int k = 0; k < batch_ && i_ < n_; ++k, ++i_) {
      const int64_t v = i_;
      spec->payload.append(reinterpret_cast<const char*>(&v), 8);
    }
    return true;
  }
  void Drop(uint64_t) override { ++dropped; }
  int dropped = 0;

 private:
  int n_, batch_, i_ = 0;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_RANGE_SOURCE_H_
