// The antialiased resize (src/vision/resample.cc) with each kernel this CPU
// runs, on random pixels, for the sizes the image pipelines see:
//   cmake --build build/tests --target stoker_micro_bench
//   build/tests/stoker_micro_bench --benchmark_filter=Resize
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "vision/resample.h"

namespace {

using stoker::vision::RowKernel;

// args: kernel, source width, source height, output width, output height.
void BM_Resize(benchmark::State& state) {
  const auto kernel = static_cast<RowKernel>(state.range(0));
  const bool runs = kernel == RowKernel::kScalar || (kernel == RowKernel::kSse41 && stoker::Cpu().sse41) ||
                    (kernel == RowKernel::kAvx2 && stoker::Cpu().avx2) ||
                    (kernel == RowKernel::kAvx512 && stoker::Cpu().avx512_vbmi_vnni);
  if (!runs) {
    state.SkipWithError("this CPU lacks the kernel");
    return;
  }
  const int64_t in_w = state.range(1), in_h = state.range(2), out_w = state.range(3), out_h = state.range(4);
  std::vector<uint8_t> src(static_cast<size_t>(in_w * in_h * 3)), dst(static_cast<size_t>(out_w * out_h * 3));
  std::mt19937 rng(1);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  const stoker::vision::RgbView view{src.data(), in_h, in_w, in_w * 3};
  for (auto _ : state) {
    stoker::vision::ResizeBilinearWith(kernel, view, out_h, out_w, 0, 0, out_h, out_w, dst.data());
    benchmark::DoNotOptimize(dst.data());
  }
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"kernel", "in_w", "in_h", "out_w", "out_h"});
  for (int k : {static_cast<int>(RowKernel::kAvx2), static_cast<int>(RowKernel::kAvx512)}) {
    b->Args({k, 318, 224, 224, 224});  // horizontal only
    b->Args({k, 224, 318, 224, 224});  // vertical only
    b->Args({k, 318, 318, 224, 224});  // a RandomResizedCrop's typical box
    b->Args({k, 500, 375, 224, 224});  // the whole image
    b->Args({k, 500, 375, 341, 256});  // Resize(256)
    b->Args({k, 150, 120, 224, 224});  // upscaling
  }
}
BENCHMARK(BM_Resize)->Apply(Sizes)->Unit(benchmark::kMicrosecond);

}  // namespace
