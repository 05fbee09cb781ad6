// Trains a small model with libtorch on a native dataset loaded by stoker:
// batches arrive as zero-copy views of stoker's shared memory and become
// torch tensors with torch::from_blob (the Batch stays alive as long as the
// tensor does).  No Python in the process.
//
//   train_libtorch DIR     (writes DIR/data.bin: 4096 samples of 16 float32
//                           features + 1 target, then trains 5 epochs)
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "stoker/loader.h"

namespace {

constexpr int64_t kFeatures = 16, kSamples = 4096;

// y = x . w + 0.5, plus a little noise.
void WriteData(const std::string& path) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> w(kFeatures);
  for (auto& v : w) v = n(rng);
  std::ofstream out(path, std::ios::binary);
  std::vector<float> rec(kFeatures + 1);
  for (int64_t i = 0; i < kSamples; ++i) {
    float y = 0.5f;
    for (int64_t k = 0; k < kFeatures; ++k) {
      rec[k] = n(rng);
      y += rec[k] * w[k];
    }
    rec[kFeatures] = y + 0.01f * n(rng);
    out.write(reinterpret_cast<const char*>(rec.data()), static_cast<std::streamsize>(rec.size() * 4));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: train_libtorch DIR\n");
    return 2;
  }
  const std::string path = std::string(argv[1]) + "/data.bin";
  WriteData(path);
  auto ds = stoker::OpenRaw(path, stoker::ElementType::kFloat32, {kFeatures + 1});
  if (!ds.ok()) {
    std::fprintf(stderr, "%s\n", ds.status().ToString().c_str());
    return 1;
  }
  stoker::LoaderOptions o;
  o.batch_size = 64;
  o.seeded_shuffle = true;
  o.num_workers = 2;
  auto loader = stoker::Loader::Create(ds.value(), o);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
    return 1;
  }
  torch::manual_seed(0);
  torch::nn::Linear model(kFeatures, 1);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05));
  double first = -1, last = -1;
  for (int epoch = 0; epoch < 5; ++epoch) {
    double total = 0;
    int64_t n = 0;
    for (const stoker::Batch& b : *loader.value()) {
      const stoker::TensorView& v = b[0];
      // Zero copy: the tensor views the slot; the deleter keeps the batch.
      auto* keep = new stoker::Batch(b);
      torch::Tensor all = torch::from_blob(const_cast<void*>(v.data), {v.shape[0], v.shape[1]},
                                           [keep](void*) { delete keep; }, torch::kFloat32);
      torch::Tensor x = all.narrow(1, 0, kFeatures), y = all.narrow(1, kFeatures, 1);
      torch::Tensor loss = torch::mse_loss(model->forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      total += loss.item<double>() * static_cast<double>(v.shape[0]);
      n += v.shape[0];
    }
    if (!loader.value()->status().ok()) {
      std::fprintf(stderr, "%s\n", loader.value()->status().ToString().c_str());
      return 1;
    }
    const double mean = total / static_cast<double>(n);
    if (first < 0) first = mean;
    last = mean;
    std::printf("epoch %d: %lld samples, mean loss %.5f\n", epoch, static_cast<long long>(n), mean);
  }
  if (!(last < first / 10)) {
    std::fprintf(stderr, "the loss did not fall (%.5f -> %.5f)\n", first, last);
    return 1;
  }
  std::printf("trained: loss %.5f -> %.5f\n", first, last);
  return 0;
}
