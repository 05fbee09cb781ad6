// libFuzzer target: tar listing and WebDataset grouping/reading, with fields
// inferred (npy, int, bytes) and declared (raw), raising and skipping.
#include <cstdint>
#include <vector>

#include "fuzz_input.h"
#include "io/tar_shard_dataset.h"

using namespace stoker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::AsFile(data, size);
  const std::vector<std::vector<TarFieldDecl>> decls = {
      {}, {{"bin", TarFieldKind::kRaw, ElementType::kInt32, {4}}, {"cls", TarFieldKind::kInt, ElementType::kInt64, {}}}};
  for (OnError on_error : {OnError::kRaise, OnError::kSkip})
    for (const auto& d : decls) {
      TarShardOptions o;
      o.on_error = on_error;
      auto ds = TarShardDataset::Open({path}, d, o);
      if (!ds.ok()) continue;
      const auto& fields = ds.value()->fields();
      std::vector<uint64_t> sizes(fields.size());
      for (uint64_t i = 0; i < ds.value()->size() && i < 64; ++i) {
        if (!ds.value()->SampleBytes(i, sizes.data()).ok()) continue;
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<uint8_t*> dst;
        bool too_big = false;
        for (uint64_t s : sizes) too_big |= s > (16u << 20);
        if (too_big) continue;
        for (uint64_t s : sizes) bufs.emplace_back(s + 1);
        for (auto& b : bufs) dst.push_back(b.data());
        ds.value()->Read(i, dst.data()).ok();
      }
    }
  return 0;
}
