// The C++ API's figures (run by bench/cpp_api.py, which also measures the
// Python native path in the same run):
//   cpp_loader throughput FILE RECORD_BYTES SECONDS
//       stoker::Loader over a RawDataset, 2 reader threads, batch 8,
//       shuffled: GB/s.
//   cpp_loader overhead SECONDS
//       tiny batches (64 samples of 64 bytes) from an in-memory C++ dataset
//       through stoker::Loader (1 and 2 threads), against a plain loop in this
//       thread doing the same copies (64 memcpys of 64 bytes into a batch
//       buffer): ns per batch.
// Each prints one JSON line.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "stoker/loader.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class InMemory : public stoker::NativeDataset {
 public:
  InMemory(uint64_t n, uint64_t bytes) : n_(n), data_(n * bytes), fields_{{"", stoker::ElementType::kUInt8, {static_cast<int64_t>(bytes)}}} {
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<uint8_t>(i * 31);
  }
  uint64_t size() const override { return n_; }
  const std::vector<stoker::FieldSpec>& fields() const override { return fields_; }
  stoker::Status Read(uint64_t i, uint8_t* const* dst) override {
    std::memcpy(dst[0], data_.data() + i * fields_[0].shape[0], static_cast<size_t>(fields_[0].shape[0]));
    return stoker::Status::OK();
  }
  std::string Describe() const override { return "in-memory"; }
  const uint8_t* data() const { return data_.data(); }

 private:
  uint64_t n_;
  std::vector<uint8_t> data_;
  std::vector<stoker::FieldSpec> fields_;
};

// Batches/s of `loader` for `seconds`, epoch after epoch; checksum to keep
// the reads honest.
double LoaderRate(stoker::Loader& loader, double seconds, uint64_t* bytes, uint64_t* sum) {
  const double t0 = Now();
  uint64_t batches = 0;
  *bytes = 0;
  for (;;) {
    for (const stoker::Batch& b : loader) {
      const stoker::TensorView& t = b[0];
      *sum += static_cast<const uint8_t*>(t.data)[t.nbytes - 1];
      *bytes += t.nbytes;
      ++batches;
      if (Now() - t0 >= seconds) return static_cast<double>(batches) / (Now() - t0);
    }
    if (!loader.status().ok()) {
      std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
      std::exit(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "throughput" && argc == 5) {
    auto ds = stoker::OpenRaw(argv[2], stoker::ElementType::kFloat32, {std::stoll(argv[3]) / 4});
    if (!ds.ok()) return std::fprintf(stderr, "%s\n", ds.status().ToString().c_str()), 1;
    stoker::LoaderOptions o;
    o.batch_size = 8;
    o.seeded_shuffle = true;
    o.num_workers = 2;
    auto l = stoker::Loader::Create(ds.value(), o);
    if (!l.ok()) return std::fprintf(stderr, "%s\n", l.status().ToString().c_str()), 1;
    uint64_t bytes = 0, sum = 0;
    const double t0 = Now();
    LoaderRate(*l.value(), std::stod(argv[4]), &bytes, &sum);
    std::printf("{\"cpp_loader_gb_per_s\": %.4f, \"check\": %llu}\n", static_cast<double>(bytes) / (Now() - t0) / 1e9,
                static_cast<unsigned long long>(sum));
    return 0;
  }
  if (mode == "overhead" && argc == 3) {
    const double seconds = std::stod(argv[2]);
    constexpr uint64_t kN = 1 << 16, kBytes = 64, kBatch = 64;
    auto ds = std::make_shared<InMemory>(kN, kBytes);
    std::string out = "{";
    for (uint32_t threads : {1u, 2u}) {
      stoker::LoaderOptions o;
      o.batch_size = kBatch;
      o.seeded_shuffle = true;
      o.num_workers = threads;
      auto l = stoker::Loader::Create(ds, o);
      if (!l.ok()) return std::fprintf(stderr, "%s\n", l.status().ToString().c_str()), 1;
      uint64_t bytes = 0, sum = 0;
      const double rate = LoaderRate(*l.value(), seconds, &bytes, &sum);
      out += "\"loader_" + std::to_string(threads) + "_threads_ns_per_batch\": " + std::to_string(1e9 / rate) + ", ";
    }
    // The plain loop: the same shuffled copies into one batch buffer.
    std::vector<uint64_t> order(kN);
    for (uint64_t i = 0; i < kN; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
    std::vector<uint8_t> batch(kBatch * kBytes);
    uint64_t sum = 0, batches = 0;
    const double t0 = Now();
    while (Now() - t0 < seconds) {
      for (uint64_t b = 0; b + kBatch <= kN; b += kBatch) {
        for (uint64_t k = 0; k < kBatch; ++k)
          std::memcpy(batch.data() + k * kBytes, ds->data() + order[b + k] * kBytes, kBytes);
        sum += batch[kBatch * kBytes - 1];
        ++batches;
      }
    }
    out += "\"plain_loop_ns_per_batch\": " + std::to_string((Now() - t0) * 1e9 / static_cast<double>(batches)) +
           ", \"check\": " + std::to_string(sum) + "}";
    std::printf("%s\n", out.c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: cpp_loader throughput FILE RECORD_BYTES SECONDS | overhead SECONDS\n");
  return 2;
}
