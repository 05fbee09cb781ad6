// Counting: a user-defined C++ dataset for the tests.
#ifndef STOKER_TESTS_COUNTING_DATASET_H_
#define STOKER_TESTS_COUNTING_DATASET_H_

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stoker/native_dataset.h"

namespace stoker::testing {

// Sample i: int64 i, then float32 [i, i+0.5] -- a user-defined C++ dataset.
class Counting : public NativeDataset {
 public:
  explicit Counting(uint64_t n, int sleep_ms_at = -1) : n_(n), sleep_at_(sleep_ms_at) {}
  uint64_t size() const override { return n_; }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t i, uint8_t* const* dst) override {
    if (static_cast<int64_t>(i) == sleep_at_) std::this_thread::sleep_for(std::chrono::seconds(3));
    if (i == 13 && fail_13_) return Status::DataLoss("sample 13 is bad on purpose");
    const int64_t v = static_cast<int64_t>(i);
    std::memcpy(dst[0], &v, 8);
    const float f[2] = {static_cast<float>(i), static_cast<float>(i) + 0.5f};
    std::memcpy(dst[1], f, 8);
    return Status::OK();
  }
  std::string Describe() const override { return "counting"; }
  bool fail_13_ = false;

 private:
  uint64_t n_;
  int64_t sleep_at_;
  std::vector<FieldSpec> fields_{{"i", ElementType::kInt64, {}}, {"f", ElementType::kFloat32, {2}}};
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_COUNTING_DATASET_H_
