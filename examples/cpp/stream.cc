// Trains on a remote dataset through the streaming cache, from C++: TFRecord
// shards on a store (a directory or http://...) with an index (`stoker index
// DIR`), fetched into a local cache directory under a byte budget while the
// loader reads them.  Each record has an int64 feature "y" (its id); every
// epoch must deliver every id once (mode full) or every id of the epoch's
// cached shards once (mode cached).
//
//   stream REMOTE CACHE_DIR MAX_BYTES [full|cached] [EPOCHS]   (full: the default)
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "stoker/loader.h"
#include "stoker/store.h"
#include "stoker/streaming.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: stream REMOTE CACHE_DIR MAX_BYTES [full|cached] [EPOCHS]\n");
    return 2;
  }
  stoker::RegisterRemoteStores();  // http(s):// and s3:// (stoker::remote, stoker/store.h)
  stoker::StreamingOptions so;
  so.remote = argv[1];
  so.local = argv[2];
  so.max_bytes = std::stoull(argv[3]);
  so.mode = argc > 4 && std::string(argv[4]) == "cached" ? stoker::StreamingMode::kCached
                                                          : stoker::StreamingMode::kFull;
  const int epochs = argc > 5 ? std::stoi(argv[5]) : 2;
  so.features = {{"y", stoker::ElementType::kInt64, {}}};
  auto ds = stoker::StreamingDataset::Open(so);
  if (!ds.ok()) {
    std::fprintf(stderr, "stream: %s\n", ds.status().ToString().c_str());
    return 1;
  }
  stoker::LoaderOptions lo;
  lo.batch_size = 32;
  lo.seeded_shuffle = true;
  lo.num_workers = 2;
  auto loader = stoker::Loader::Create(ds.value(), lo);
  if (!loader.ok()) {
    std::fprintf(stderr, "stream: %s\n", loader.status().ToString().c_str());
    return 1;
  }
  for (int e = 0; e < epochs; ++e) {
    std::vector<int64_t> ids;
    for (const stoker::Batch& b : *loader.value()) {
      const stoker::TensorView& y = b.field("y")->tensor;
      ids.insert(ids.end(), y.as<int64_t>(), y.as<int64_t>() + y.shape[0]);
    }
    if (!loader.value()->status().ok()) {
      std::fprintf(stderr, "stream: %s\n", loader.value()->status().ToString().c_str());
      return 1;
    }
    std::sort(ids.begin(), ids.end());
    const bool once = std::adjacent_find(ids.begin(), ids.end()) == ids.end() && ids.size() == ds.value()->size();
    const stoker::StreamingStats st = ds.value()->stats();
    std::printf("epoch %d: %zu samples from %llu shards, each once: %s; cached %llu shards, %llu hits, "
                "%llu downloads (%llu through memory), %.0f%% of the remote seen\n",
                e, ids.size(), static_cast<unsigned long long>(st.epoch_shards), once ? "yes" : "NO",
                static_cast<unsigned long long>(st.cached_shards), static_cast<unsigned long long>(st.hits),
                static_cast<unsigned long long>(st.downloads), static_cast<unsigned long long>(st.streamed),
                100 * st.fraction_seen);
    if (!once) return 1;
  }
  return 0;
}
