// streaming/streaming_dataset: epochs over a store, in both modes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "cache/lock_fd.h"
#include "cache/shard_cache.h"
#include "core/unique_fd.h"
#include "io/tfrecord_writer.h"
#include "stoker/loader.h"
#include "stoker/shard_index.h"
#include "stoker/streaming.h"
#include "fault_store.h"
#include "watchdog.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

constexpr int kShards = 8, kPerShard = 20;

// A remote directory of kShards TFRecord shards; sample i: y = i,
// x = [i] * 64 (float32); and its index.
std::string MakeRemote(const std::string& tag) {
  const std::string dir = ::testing::TempDir() + "streaming_" + tag + "_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir + "/remote");
  std::vector<ShardInfo> index;
  for (int s = 0; s < kShards; ++s) {
    const std::string path = dir + "/remote/shard-" + std::to_string(s) + ".tfrecord";
    auto w = TFRecordWriter::Create(path);
    EXPECT_TRUE(w.ok());
    for (int i = s * kPerShard; i < (s + 1) * kPerShard; ++i) {
      std::vector<float> x(64, static_cast<float>(i));
      const int64_t y = i;
      FeatureValue fx, fy;
      fx.name = "x", fx.kind = FeatureValue::Kind::kFloat, fx.floats = x.data(), fx.count = x.size();
      fy.name = "y", fy.kind = FeatureValue::Kind::kInt64, fy.ints = &y, fy.count = 1;
      EXPECT_TRUE(w.value()->Write({fx, fy}).ok());
    }
    EXPECT_TRUE(w.value()->Close().ok());
    auto info = DescribeShard(path, ShardFormat::kTFRecord);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    index.push_back(info.value());
  }
  std::ofstream(dir + "/remote/index.txt") << FormatShardIndex(index);
  return dir;
}

StreamingOptions Options(const std::string& dir, StreamingMode mode, uint64_t max_bytes) {
  StreamingOptions o;
  o.remote = dir + "/remote";
  o.local = dir + "/cache";
  o.max_bytes = max_bytes;
  o.mode = mode;
  o.features = {{"x", ElementType::kFloat32, {64}}, {"y", ElementType::kInt64, {}}};
  o.shuffle_window = 2;
  o.prefetch = 2;
  return o;
}

uint64_t ShardBytes(const std::string& dir) { return fs::file_size(dir + "/remote/shard-0.tfrecord"); }

std::vector<int64_t> Epoch(Loader& l) {
  std::vector<int64_t> ys;
  for (const Batch& b : l)
    for (uint64_t k = 0; k < b.size(); ++k) {
      const int64_t y = b.field("y")->tensor.as<int64_t>()[k];
      EXPECT_EQ(b.field("x")->tensor.as<float>()[k * 64 + 63], static_cast<float>(y));
      ys.push_back(y);
    }
  EXPECT_TRUE(l.status().ok()) << l.status().ToString();
  return ys;
}

// A loader of batches of 7, shuffled, read by 2 threads.
std::unique_ptr<Loader> ShuffledLoader(std::shared_ptr<StreamingDataset> ds) {
  LoaderOptions lo;
  lo.batch_size = 7;
  lo.seeded_shuffle = true;
  lo.num_workers = 2;
  auto l = Loader::Create(std::move(ds), lo);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(l).value() : nullptr;
}

// An epoch of `l` gives every sample of the remote once.
void EverySampleOnce(Loader& l) {
  std::vector<int64_t> ys = Epoch(l);
  std::sort(ys.begin(), ys.end());
  ASSERT_EQ(ys.size(), size_t{kShards * kPerShard});
  for (int i = 0; i < kShards * kPerShard; ++i) ASSERT_EQ(ys[i], i);
}

// A worker process's reader (StreamingDataset::OpenReader): every sample of
// the full epoch from the shard that holds it, each shard fetched into the
// shared cache directory on first use, with no fetcher threads; the modes
// it cannot serve are refused with what to do instead.
TEST(Streaming, AReaderReadsEverySampleThroughTheSharedCache) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("reader");
  StreamingOptions o = Options(dir, StreamingMode::kFull, 1 << 30);
  std::ifstream in(dir + "/remote/index.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto shards = ParseShardIndex(text, "index.txt");
  ASSERT_TRUE(shards.ok()) << shards.status().ToString();
  o.shards = shards.value();
  auto r = StreamingDataset::OpenReader(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  NativeDataset& d = *r.value();
  ASSERT_EQ(d.size(), uint64_t{kShards * kPerShard});
  EXPECT_FALSE(fs::exists(dir + "/cache/shard-3.tfrecord"));  // nothing fetched ahead
  std::vector<float> x(64);
  int64_t y = -1;
  for (uint64_t i : {61ul, 0ul, 159ul, 60ul}) {
    uint8_t* dst[2] = {reinterpret_cast<uint8_t*>(x.data()), reinterpret_cast<uint8_t*>(&y)};
    ASSERT_TRUE(d.Read(i, dst).ok());
    EXPECT_EQ(y, static_cast<int64_t>(i));
    EXPECT_EQ(x[63], static_cast<float>(i));
  }
  EXPECT_TRUE(fs::exists(dir + "/cache/shard-3.tfrecord"));  // sample 61's shard, through the cache
  EXPECT_FALSE(fs::exists(dir + "/cache/shard-5.tfrecord"));
  uint8_t* none[2] = {nullptr, nullptr};
  EXPECT_NE(d.Read(kShards * kPerShard, none).message().find("out of range"), std::string::npos);
  StreamingOptions cached = o;
  cached.mode = StreamingMode::kCached;
  EXPECT_NE(StreamingDataset::OpenReader(cached).status().message().find("open it with mode='full'"),
            std::string::npos);
  StreamingOptions no_room = o;
  no_room.max_bytes = 0;
  EXPECT_NE(StreamingDataset::OpenReader(no_room).status().message().find("max_bytes > 0"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Streaming, FullModeThroughTheCppLoaderEverySampleOnce) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("full");
  auto ds = StreamingDataset::Open(Options(dir, StreamingMode::kFull, 4 * ShardBytes(dir)));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), uint64_t{kShards * kPerShard});
  std::unique_ptr<Loader> l = ShuffledLoader(ds.value());
  ASSERT_TRUE(l);
  for (int e = 0; e < 2; ++e) EverySampleOnce(*l);
  const StreamingStats st = ds.value()->stats();
  EXPECT_EQ(st.evictions, 0u);  // what does not fit streams through memory
  EXPECT_GE(st.streamed, 2u * (kShards - 4));
  EXPECT_GE(st.hits, 3u);  // epoch 2 reads what the cache kept
  EXPECT_LE(st.used_bytes, 4 * ShardBytes(dir));
  EXPECT_EQ(st.seen_shards, uint64_t{kShards});
  l.reset();
  ds.value().reset();
  fs::remove_all(dir);
}

// SetFetchers: a caller (a loader's autotuner) takes the number of
// fetchers over from FetcherScaling; they start at once and leave after
// their download, every epoch still whole; out-of-range counts, a dataset
// opened with a fixed number and a closed one are refused, saying why.
TEST(Streaming, SetFetchersTakesTheCountOverAndEveryEpochStaysWhole) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("set_fetchers");
  auto ds = StreamingDataset::Open(Options(dir, StreamingMode::kFull, 2 * ShardBytes(dir)));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  StreamingDataset& d = *ds.value();
  const StreamingStats before = d.stats();
  ASSERT_TRUE(before.fetchers_auto);
  EXPECT_FALSE(before.fetchers_by_caller);
  ASSERT_GE(before.fetchers_most, 3u);
  std::unique_ptr<Loader> l = ShuffledLoader(ds.value());
  ASSERT_TRUE(l);
  for (uint32_t n : {3u, 1u, before.fetchers_most, 2u}) {
    ASSERT_TRUE(d.SetFetchers(n).ok());
    EverySampleOnce(*l);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (d.stats().fetchers != n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(d.stats().fetchers, n);
    EXPECT_TRUE(d.stats().fetchers_by_caller);
  }
  EXPECT_NE(d.SetFetchers(0).message().find("from 1 to"), std::string::npos);
  EXPECT_NE(d.SetFetchers(before.fetchers_most + 1).message().find("fetchers_most"), std::string::npos);
  l.reset();
  d.Close();
  EXPECT_TRUE(d.SetFetchers(1).IsClosed());
  StreamingOptions fixed_o = Options(dir, StreamingMode::kFull, 2 * ShardBytes(dir));
  fixed_o.local = dir + "/cache_fixed";
  fixed_o.fetchers = 2;
  auto fixed = StreamingDataset::Open(fixed_o);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_NE(fixed.value()->SetFetchers(3).message().find("fetchers=None"), std::string::npos);
  fixed.value().reset();
  ds.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, RanksTakeEqualDisjointContiguousParts) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("ranks");
  auto ds = StreamingDataset::Open(Options(dir, StreamingMode::kFull, 1 << 30));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  std::multiset<int64_t> all;
  for (uint32_t r = 0; r < 3; ++r) {
    std::vector<int64_t> o = ds.value()->Order(OrderRecipe{4, true, 9, r, 3, true});
    EXPECT_EQ(o.size(), size_t{(kShards * kPerShard + 2) / 3});
    all.insert(o.begin(), o.end());
    // Contiguous in the epoch's shard-by-shard order: few shards per rank.
    std::set<int64_t> shards;
    for (int64_t i : o) shards.insert(i / kPerShard);
    EXPECT_LE(shards.size(), size_t{kShards / 3 + 3});
  }
  for (int i = 0; i < kShards * kPerShard; ++i) EXPECT_GE(all.count(i), 1u);
  EXPECT_EQ(all.size(), size_t{(kShards * kPerShard + 2) / 3 * 3});  // padded by repeating
  // The same (seed, epoch) gives the same order; another epoch another.
  EXPECT_EQ(ds.value()->Order(OrderRecipe{4, true, 9, 0, 1, true}), ds.value()->Order(OrderRecipe{4, true, 9, 0, 1, true}));
  EXPECT_NE(ds.value()->Order(OrderRecipe{4, true, 9, 0, 1, true}), ds.value()->Order(OrderRecipe{5, true, 9, 0, 1, true}));
  ds.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, GrowingModeEpochsAreTheCachedShardsAndRepeatable) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("growing");
  StreamingOptions o = Options(dir, StreamingMode::kCached, 1 << 30);
  o.min_shards = 3;
  auto ds = StreamingDataset::Open(o);
  ASSERT_TRUE(ds.value() != nullptr) << ds.status().ToString();
  EXPECT_GE(ds.value()->epoch_shards().size(), 3u);
  LoaderOptions lo;
  lo.batch_size = 5;
  lo.seeded_shuffle = true;
  auto l = Loader::Create(ds.value(), lo);
  ASSERT_TRUE(l.ok());
  std::vector<int64_t> ys = Epoch(*l.value());
  EXPECT_EQ(ys.size(), ds.value()->epoch_shards().size() * kPerShard);
  // Wait until every shard is cached: the next epoch has them all.
  for (int i = 0; i < 500 && ds.value()->stats().cached_shards < kShards; ++i) usleep(10000);
  ys = Epoch(*l.value());
  EXPECT_EQ(ys.size(), size_t{kShards * kPerShard});
  // An epoch repeated from its shard list (a resume, or rank 0's snapshot).
  ds.value()->UseShards({"shard-5.tfrecord", "shard-1.tfrecord"});
  ASSERT_TRUE(ds.value()->BeginEpoch(9).ok());
  EXPECT_EQ(ds.value()->epoch_shards(), (std::vector<std::string>{"shard-1.tfrecord", "shard-5.tfrecord"}));
  EXPECT_EQ(ds.value()->size(), uint64_t{2 * kPerShard});
  ds.value()->UseShards({"nope.tfrecord"});
  Status st = ds.value()->BeginEpoch(10);
  EXPECT_NE(st.message().find("shard 'nope.tfrecord'"), std::string::npos) << st.ToString();
  l.value().reset();
  ds.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, LoaderStateRepeatsAGrowingEpochsShards) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("restore");
  StreamingOptions o = Options(dir, StreamingMode::kCached, 1 << 30);
  auto ds1 = StreamingDataset::Open(o);
  ASSERT_TRUE(ds1.ok()) << ds1.status().ToString();
  ds1.value()->UseShards({"shard-1.tfrecord", "shard-2.tfrecord", "shard-5.tfrecord"});  // this epoch: these
  LoaderOptions lo;
  lo.batch_size = 5;
  lo.seeded_shuffle = true;
  lo.seed = 3;
  auto l1 = Loader::Create(ds1.value(), lo);
  ASSERT_TRUE(l1.ok());
  auto ys = [](const Batch& b) {
    std::vector<int64_t> v;
    for (uint64_t k = 0; k < b.size(); ++k) v.push_back(b.field("y")->tensor.as<int64_t>()[k]);
    return v;
  };
  Batch b;
  bool end = false;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(l1.value()->Next(&b, &end).ok() && !end);
  const std::string saved = l1.value()->state().Serialize();
  std::vector<std::vector<int64_t>> rest;
  while (l1.value()->Next(&b, &end).ok() && !end) rest.push_back(ys(b));
  ASSERT_EQ(rest.size(), size_t{3 * kPerShard / 5 - 4});
  // A new process: the cache has all shards by now, the epoch is repeated.
  for (int i = 0; i < 500 && ds1.value()->stats().cached_shards < kShards; ++i) usleep(10000);
  auto ds2 = StreamingDataset::Open(o);
  ASSERT_TRUE(ds2.ok());
  EXPECT_EQ(ds2.value()->epoch_shards().size(), size_t{kShards});
  auto l2 = Loader::Create(ds2.value(), lo);
  auto st = LoaderState::Parse(saved);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st.value().dataset_epoch, "shard-1.tfrecord\nshard-2.tfrecord\nshard-5.tfrecord\n");
  ASSERT_TRUE(l2.value()->Restore(st.value()).ok());
  std::vector<std::vector<int64_t>> again;
  while (l2.value()->Next(&b, &end).ok() && !end) again.push_back(ys(b));
  EXPECT_EQ(again, rest);
  EXPECT_EQ(ds2.value()->epoch_shards().size(), 3u);
  l1.value().reset();
  l2.value().reset();
  ds1.value().reset();
  ds2.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, ErrorsNameWhatIsWrong) {
  const std::string dir = MakeRemote("errors");
  StreamingOptions o = Options(dir, StreamingMode::kFull, 1 << 30);
  o.features.clear();
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("declare the TFRecord features"), std::string::npos);
  o.features = {{"y", ElementType::kInt64, {}}, {"y", ElementType::kFloat32, {}}};
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("feature 'y' is declared twice"), std::string::npos);
  o = Options(dir, StreamingMode::kFull, 1 << 30);
  o.index = "missing.txt";
  EXPECT_FALSE(StreamingDataset::Open(o).ok());
  o = Options(dir, StreamingMode::kCached, 100);
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("is larger than max_bytes"), std::string::npos);
  o = Options(dir, StreamingMode::kCached, 0);
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("must be > 0 in mode 'cached'"), std::string::npos);
  EXPECT_TRUE(StreamingDataset::Open(Options(dir, StreamingMode::kFull, 0)).ok());  // full: no cache at all
  o = Options(dir, StreamingMode::kFull, 0);
  o.fetcher_cpus = {-3};
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("fetcher_cpus: CPU -3 is not one this process may run on"),
            std::string::npos);
  // A forked child cannot read (no fetchers there): an error, not a hang.
  auto ds = StreamingDataset::Open(Options(dir, StreamingMode::kFull, 1 << 30));
  ASSERT_TRUE(ds.ok());
  LoaderOptions lo;
  lo.use_processes = true;
  lo.batch_size = 4;
  auto l = Loader::Create(ds.value(), lo);
  ASSERT_TRUE(l.ok());
  Batch b;
  bool end = false;
  Status s = l.value()->Next(&b, &end);
  EXPECT_NE(s.message().find("read in the process that opened it"), std::string::npos) << s.ToString();
  l.value().reset();
  ds.value().reset();
  fs::remove_all(dir);
}

// Reads samples [0, n) of the current epoch; the y of each, or -1 where the
// read failed (its error in *errors).
std::vector<int64_t> ReadAll(StreamingDataset& ds, std::vector<std::string>* errors) {
  std::vector<int64_t> ys;
  float x[64];
  int64_t y = -1;
  uint8_t* dst[2] = {reinterpret_cast<uint8_t*>(x), reinterpret_cast<uint8_t*>(&y)};
  for (int64_t i : ds.Order(OrderRecipe{})) {
    y = -1;
    Status st = ds.Read(static_cast<uint64_t>(i), dst);
    if (!st.ok()) errors->push_back(st.message());
    ys.push_back(st.ok() ? y : -1);
  }
  return ys;
}

TEST(Streaming, FullModeStoreFailureReachesItsReadersThenTheNextEpochFetchesAgain) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("fault_full");
  auto plan = std::make_shared<testing::FaultPlan>();
  plan->fail_next["shard-3.tfrecord"] = 1;
  StreamingOptions o = Options(dir, StreamingMode::kFull, 0);  // every shard streams through memory (Read)
  o.open_store = testing::FaultStore::Factory(dir + "/remote", plan);
  auto ds = StreamingDataset::Open(o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  std::vector<std::string> errors;
  std::vector<int64_t> ys = ReadAll(*ds.value(), &errors);
  ASSERT_EQ(ys.size(), size_t{kShards * kPerShard});
  for (int i = 0; i < kShards * kPerShard; ++i) EXPECT_EQ(ys[i], i / kPerShard == 3 ? -1 : i) << "sample " << i;
  ASSERT_EQ(errors.size(), size_t{kPerShard});  // each read of the shard says why, none waits
  EXPECT_NE(errors[0].find("shard-3.tfrecord"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("injected: the store went away"), std::string::npos) << errors[0];
  EXPECT_GE(ds.value()->stats().fetch_errors, 1u);
  // The next epoch fetches the shard again: nothing is lost for good.
  ASSERT_TRUE(ds.value()->BeginEpoch(1).ok());
  errors.clear();
  ys = ReadAll(*ds.value(), &errors);
  EXPECT_TRUE(errors.empty()) << errors[0];
  for (int i = 0; i < kShards * kPerShard; ++i) ASSERT_EQ(ys[i], i);
  EXPECT_EQ(plan->Calls("shard-3.tfrecord"), 2);
  ds.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, GrowingModeFetchesAgainAfterTransientFailuresAndResumesThePart) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("fault_transient");
  auto plan = std::make_shared<testing::FaultPlan>();
  plan->fail_next["shard-4.tfrecord"] = 2;  // two downloads cut halfway, then the store is back
  StreamingOptions o = Options(dir, StreamingMode::kCached, 1 << 30);
  o.min_shards = kShards;
  o.store.backoff_s = 0.01;
  o.open_store = testing::FaultStore::Factory(dir + "/remote", plan);
  auto ds = StreamingDataset::Open(o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->epoch_shards().size(), size_t{kShards});
  std::vector<std::string> errors;
  std::vector<int64_t> ys = ReadAll(*ds.value(), &errors);
  EXPECT_TRUE(errors.empty()) << errors[0];
  for (int i = 0; i < kShards * kPerShard; ++i) ASSERT_EQ(ys[i], i);
  const StreamingStats st = ds.value()->stats();
  EXPECT_EQ(plan->Calls("shard-4.tfrecord"), 3);
  EXPECT_EQ(st.fetch_errors, 2u);
  EXPECT_NE(st.last_fetch_error.find("injected"), std::string::npos) << st.last_fetch_error;
  // Resumed from the part each cut left: the shard's bytes came once, not three times.
  EXPECT_LT(st.bytes_downloaded, (kShards + 1) * ShardBytes(dir));
  ds.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, GrowingModeLeavesACorruptShardOutAndSaysWhich) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("fault_corrupt");
  auto plan = std::make_shared<testing::FaultPlan>();
  plan->corrupt["shard-2.tfrecord"] = true;
  StreamingOptions o = Options(dir, StreamingMode::kCached, 1 << 30);
  o.min_shards = kShards - 1;
  o.open_store = testing::FaultStore::Factory(dir + "/remote", plan);
  auto ds = StreamingDataset::Open(o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  for (int i = 0; i < 500 && ds.value()->stats().fetch_errors == 0; ++i) usleep(10000);
  const StreamingStats st = ds.value()->stats();
  ASSERT_EQ(st.fetch_errors, 1u);
  EXPECT_NE(st.last_fetch_error.find("shard shard-2.tfrecord"), std::string::npos) << st.last_fetch_error;
  EXPECT_NE(st.last_fetch_error.find("CRC-32C"), std::string::npos) << st.last_fetch_error;
  ASSERT_TRUE(ds.value()->BeginEpoch(1).ok());
  const std::vector<std::string> shards = ds.value()->epoch_shards();
  EXPECT_EQ(shards.size(), size_t{kShards - 1});
  EXPECT_EQ(std::count(shards.begin(), shards.end(), "shard-2.tfrecord"), 0);
  EXPECT_EQ(plan->Calls("shard-2.tfrecord"), 1);  // corrupt on the store: not fetched again
  EXPECT_FALSE(fs::exists(dir + "/cache/shard-2.tfrecord"));
  ds.value().reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
