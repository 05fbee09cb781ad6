// One stoker.vision train item after another on one thread, with no Python
// and no loader around it: read, partial decode, RandomResizedCrop(224),
// flip, float32, normalize, written CHW.  For perf, which sees stoker's own
// functions by name here (the Python module is stripped):
//   cmake --build build/tests --target stoker_vision_item_bench
//   perf record -o /tmp/perf.item -- build/tests/stoker_vision_item_bench DIR [ROUNDS]
//   perf report -i /tmp/perf.item --no-children --sort dso,symbol
// DIR: a folder of .jpg files (any depth), e.g. bench/images.py's --root.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "stoker/image_dataset.h"
#include "stoker/image_transforms.h"

namespace {

stoker::ImageOp Op(stoker::ImageOp::Kind k, int64_t h = 0, int64_t w = 0) {
  stoker::ImageOp o;
  o.kind = k;
  o.height = h;
  o.width = w;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  using stoker::ImageOp;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [ROUNDS]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
    if (e.path().extension() == ".jpg") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    std::fprintf(stderr, "no .jpg files under %s\n", argv[1]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 2;
  auto rrc = Op(ImageOp::Kind::kRandomResizedCrop, 224, 224);
  rrc.scale_lo = 0.08, rrc.scale_hi = 1.0, rrc.ratio_lo = 3.0 / 4.0, rrc.ratio_hi = 4.0 / 3.0;
  auto flip = Op(ImageOp::Kind::kHorizontalFlip);
  flip.p = 0.5;
  auto cast = Op(ImageOp::Kind::kToDtype);
  cast.dtype = stoker::ElementType::kFloat32;
  cast.scale = true;
  auto norm = Op(ImageOp::Kind::kNormalize);
  norm.mean = {0.485, 0.456, 0.406};
  norm.stddev = {0.229, 0.224, 0.225};
  auto pipe = stoker::ImagePipeline::Make({rrc, flip, cast, norm});
  if (!pipe.ok()) {
    std::fprintf(stderr, "%s\n", pipe.status().ToString().c_str());
    return 1;
  }
  auto ds = stoker::ImageFolderDataset(paths, std::vector<int64_t>(paths.size(), 0), pipe.value());
  if (!ds.ok()) {
    std::fprintf(stderr, "%s\n", ds.status().ToString().c_str());
    return 1;
  }
  // A batch's worth of room (64 images), written in turn as a loader would.
  constexpr size_t kImage = 3 * 224 * 224;
  std::vector<float> batch(64 * kImage);
  int64_t label = 0, h = 0, w = 0;
  size_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < paths.size(); ++i, ++n) {
      uint8_t* dst[2] = {reinterpret_cast<uint8_t*>(batch.data() + (n % 64) * kImage),
                         reinterpret_cast<uint8_t*>(&label)};
      stoker::Status s = ds.value()->ReadWith(i, i * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r), dst, &h, &w);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
    }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu items, %.3f ms per item (one thread)\n", n, ms / static_cast<double>(n));
  return 0;
}
