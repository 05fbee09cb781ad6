// The streaming cache without Python: the shard index, the cache's
// accounting of what dead processes left, and StreamingDataset (a directory
// store) through stoker::Loader in both modes, with ranks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "cache/lock_fd.h"
#include "cache/shard_cache.h"
#include "core/unique_fd.h"
#include "io/tfrecord_writer.h"
#include "stoker/loader.h"
#include "stoker/shard_index.h"
#include "stoker/streaming.h"
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

// A cache directory <dir>/cache over a file store <dir>/src holding
// `files` (name, bytes), under a fresh temporary <dir>.
struct CacheOverFiles {
  std::string dir;
  std::unique_ptr<ShardCache> cache;
  std::unique_ptr<Store> store;
};
CacheOverFiles MakeCacheOverFiles(const std::string& tag, uint64_t max_bytes,
                                  const std::vector<std::pair<std::string, size_t>>& files) {
  CacheOverFiles c;
  c.dir = ::testing::TempDir() + tag + "_" + std::to_string(getpid());
  fs::remove_all(c.dir);
  fs::create_directories(c.dir + "/src");
  for (const auto& [name, bytes] : files) std::ofstream(c.dir + "/src/" + name) << std::string(bytes, name[0]);
  auto cache = ShardCache::Open(c.dir + "/cache", max_bytes, EvictionOrder::kOldest);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  if (cache.ok()) c.cache = std::move(cache).value();
  auto store = Store::Open(c.dir + "/src");
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (store.ok()) c.store = std::move(store).value();
  return c;
}

TEST(ShardIndex, ParsesFourColumnsAndRoundTrips) {
  auto r = ParseShardIndex("# c\na.tar 10\nb.tar 20 0000abcd\nc.tar 30 - 7\n\n", "idx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_FALSE(r.value()[0].has_crc);
  EXPECT_TRUE(r.value()[1].has_crc && r.value()[1].crc32c == 0xabcd && !r.value()[1].has_samples);
  EXPECT_TRUE(r.value()[2].has_samples && r.value()[2].samples == 7 && !r.value()[2].has_crc);
  auto again = ParseShardIndex(FormatShardIndex(r.value()), "again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()[2].samples, 7u);
  EXPECT_EQ(again.value()[1].crc32c, 0xabcdu);
  auto bad = ParseShardIndex("a 1\na 2\n", "idx");
  EXPECT_NE(bad.status().message().find("idx line 2: shard 'a' is listed twice"), std::string::npos);
  bad = ParseShardIndex("a 1 - x\n", "idx");
  EXPECT_NE(bad.status().message().find("samples 'x' is not a number"), std::string::npos);
  bad = ParseShardIndex("a 1 - 2 3\n", "idx");
  EXPECT_NE(bad.status().message().find("unexpected '3'"), std::string::npos);
}

TEST(ShardCache, PartsLeftByTheDeadCountAndAreEvictedFirst) {
  const std::string dir = ::testing::TempDir() + "orphans_" + std::to_string(getpid());
  fs::remove_all(dir);
  auto cache = ShardCache::Open(dir, 10000, EvictionOrder::kOldest);
  ASSERT_TRUE(cache.ok());
  std::ofstream(dir + "/old.tar.part") << std::string(6000, 'x');  // its downloader died
  EXPECT_EQ(cache.value()->UsedBytes().value(), 6000u);
  fs::create_directories(dir + "/src");
  std::ofstream(dir + "/src/new.tar") << std::string(5000, 'y');
  auto store = Store::Open(dir + "/src");
  ASSERT_TRUE(store.ok());
  auto pin = cache.value()->Fetch(*store.value(), ShardInfo{"new.tar", 5000});
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_FALSE(fs::exists(dir + "/old.tar.part"));
  EXPECT_EQ(cache.value()->UsedBytes().value(), 5000u);
  fs::remove_all(dir);
}

TEST(ShardCache, CountsADownloadOnceBetweenItsRenameAndItsReservationsRemoval) {
  // A live download (its lock held) that has renamed its part to the shard
  // and not yet removed its reservation: the shard counts once, not twice.
  const std::string dir = ::testing::TempDir() + "reserved_" + std::to_string(getpid());
  fs::remove_all(dir);
  auto cache = ShardCache::Open(dir, 100000, EvictionOrder::kOldest);
  ASSERT_TRUE(cache.ok());
  const int lock = open((dir + "/a.tar.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(flock(lock, LOCK_EX), 0);  // the downloader lives
  std::ofstream(dir + "/a.tar.reserve") << "5000";
  EXPECT_EQ(cache.value()->UsedBytes().value(), 5000u);  // reserved, nothing written
  std::ofstream(dir + "/a.tar.part") << std::string(2000, 'x');
  EXPECT_EQ(cache.value()->UsedBytes().value(), 5000u);  // the part is inside its reservation
  fs::rename(dir + "/a.tar.part", dir + "/a.tar");
  fs::resize_file(dir + "/a.tar", 5000);
  EXPECT_EQ(cache.value()->UsedBytes().value(), 5000u);  // renamed: once
  fs::resize_file(dir + "/a.tar", 3000);  // a file of another size: what the download replaces
  EXPECT_EQ(cache.value()->UsedBytes().value(), 8000u);
  close(lock);
  fs::remove_all(dir);
}

TEST(ShardCache, EvictsTheOldestWithItsRecordIndexOnly) {
  const std::string dir = ::testing::TempDir() + "evict_index_" + std::to_string(getpid());
  fs::remove_all(dir);
  auto cache = ShardCache::Open(dir, 10000, EvictionOrder::kOldest);
  ASSERT_TRUE(cache.ok());
  std::ofstream(dir + "/a.tar") << std::string(5000, 'a');
  std::ofstream(dir + "/b.tar") << std::string(5000, 'b');
  fs::last_write_time(dir + "/a.tar", fs::file_time_type::clock::now() - std::chrono::hours(2));
  fs::last_write_time(dir + "/b.tar", fs::file_time_type::clock::now() - std::chrono::hours(1));
  const std::string idx = dir + "/.stoker-index/";
  for (const char* f : {"a.tar.11.stoker-index", "b.tar.22.stoker-index", "a.tarx.33.stoker-index"})
    std::ofstream(idx + f) << "i";
  fs::create_directories(dir + "/src");
  std::ofstream(dir + "/src/c.tar") << std::string(5000, 'c');
  auto store = Store::Open(dir + "/src");
  ASSERT_TRUE(store.ok());
  auto pin = cache.value()->Fetch(*store.value(), ShardInfo{"c.tar", 5000});
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_FALSE(fs::exists(dir + "/a.tar"));  // the oldest
  EXPECT_TRUE(fs::exists(dir + "/b.tar"));
  EXPECT_EQ(cache.value()->evictions(), 1u);
  EXPECT_FALSE(fs::exists(idx + "a.tar.11.stoker-index"));
  EXPECT_TRUE(fs::exists(idx + "b.tar.22.stoker-index"));
  EXPECT_TRUE(fs::exists(idx + "a.tarx.33.stoker-index"));  // another shard's (a.tarx is not cached either: left to the sweep at open)
  EXPECT_EQ(cache.value()->UsedBytes().value(), 10000u);
  fs::remove_all(dir);
}

TEST(LockFd, AForkedChildDoesNotKeepTheParentsLock) {
  // A child forked while the parent holds a cache lock, and still alive
  // when the parent lets go of it: the lock is free (the child's copy of
  // the descriptor points at /dev/null).  A plain descriptor's copy keeps it.
  testing::Watchdog wd(std::chrono::seconds(30), "LockFd fork test");
  const std::string path = ::testing::TempDir() + "lockfd_" + std::to_string(getpid());
  for (bool registered : {true, false}) {
    LockFd locked;
    UniqueFd plain;
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    if (registered) locked.reset(fd); else plain.reset(fd);
    ASSERT_EQ(flock(fd, LOCK_EX), 0);
    int go[2], ready[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    if (child == 0) {  // running (past fork's handlers) until the parent closes its end of `go`
      close(go[1]);
      close(ready[0]);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(1);
      while (read(go[0], &c, 1) > 0) {
      }
      _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    if (registered) locked.reset(); else plain.reset();  // the parent lets go
    const int again = open(path.c_str(), O_RDWR | O_CLOEXEC);
    const bool free = flock(again, LOCK_EX | LOCK_NB) == 0;
    close(again);
    close(go[1]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_EQ(free, registered) << (registered ? "the child kept the parent's lock"
                                               : "a plain descriptor's copy should keep it (control)");
  }
  EXPECT_EQ(LockFd::RecordedForTest(), 0);
  unlink(path.c_str());
}

TEST(ShardCache, EvictsNothingWhenEvictingCannotMakeRoom) {
  CacheOverFiles t = MakeCacheOverFiles("noroom", 10000, {{"a.tar", 4000}, {"b.tar", 4000}, {"c.tar", 7000}});
  ASSERT_TRUE(t.cache && t.store);
  const std::string& dir = t.dir;
  auto a = t.cache->Fetch(*t.store, ShardInfo{"a.tar", 4000});  // held: in use
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(t.cache->Fetch(*t.store, ShardInfo{"b.tar", 4000}).ok());  // not held
  // c needs b and a gone; a is in use, so evicting b alone would not do.
  auto c = t.cache->Fetch(*t.store, ShardInfo{"c.tar", 7000});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.status().IsResourceExhausted()) << c.status().ToString();
  EXPECT_NE(c.status().message().find("is full"), std::string::npos) << c.status().ToString();
  EXPECT_TRUE(t.cache->IsCached(ShardInfo{"b.tar", 4000}));
  EXPECT_EQ(t.cache->evictions(), 0u);
  a = ShardCache::Pin();  // a is free: evicting both makes room...
  c = t.cache->Fetch(*t.store, ShardInfo{"c.tar", 7000}, /*may_evict=*/false);
  ASSERT_FALSE(c.ok());  // ...but not for a fetch that may not evict (full mode's)
  EXPECT_NE(c.status().message().find("no room for shard c.tar without evicting"), std::string::npos)
      << c.status().ToString();
  EXPECT_EQ(t.cache->evictions(), 0u);
  c = t.cache->Fetch(*t.store, ShardInfo{"c.tar", 7000});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(t.cache->evictions(), 2u);
  fs::remove_all(dir);
}

TEST(ShardCache, CachedAmongCountsOnlyCompleteShardsOfTheirIndexedSize) {
  CacheOverFiles t = MakeCacheOverFiles("among", 100000, {{"a.tar", 4000}, {"b.tar", 4000}, {"c.tar", 3000}});
  ASSERT_TRUE(t.cache && t.store);
  const std::string& dir = t.dir;
  for (const char* n : {"a.tar", "b.tar", "c.tar"})
    ASSERT_TRUE(t.cache->Fetch(*t.store, ShardInfo{n, std::string(n) == "c.tar" ? 3000u : 4000u}).ok());
  fs::resize_file(dir + "/cache/b.tar", 1000);  // damaged: not the size the index gives
  fs::remove(dir + "/cache/c.tar");
  std::ofstream(dir + "/cache/c.tar.part") << std::string(3000, 'c');  // a download, not a shard
  // Many remote shards, three of them with files in the directory: a, b
  // (wrong size) and c (only its part).
  std::vector<ShardInfo> remote;
  for (int i = 0; i < 1000; ++i) remote.push_back(ShardInfo{"r-" + std::to_string(i) + ".tar", 4000});
  remote[10] = ShardInfo{"a.tar", 4000};
  remote[500] = ShardInfo{"b.tar", 4000};
  remote[900] = ShardInfo{"c.tar", 3000};
  EXPECT_EQ(t.cache->CachedAmong(remote), std::vector<uint32_t>{10});
  remote[11] = ShardInfo{"a.tar", 4000};  // listed twice: both places
  remote[500] = ShardInfo{"b.tar", 1000};  // the size the file has
  EXPECT_EQ(t.cache->CachedAmong(remote), (std::vector<uint32_t>{10, 11, 500}));
  EXPECT_TRUE(t.cache->CachedAmong({}).empty());
  fs::remove_all(dir);
}

TEST(ShardCache, RefusesADirectoryHoldingOtherFiles) {
  const std::string dir = ::testing::TempDir() + "foreign_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/a.tar") << "shard";
  std::ofstream(dir + "/b.tar.part") << "half";
  // Shards of the dataset copied there, or left by a crash: a cache.
  EXPECT_TRUE(ShardCache::Open(dir, 1 << 20, EvictionOrder::kOldest, {ShardInfo{"a.tar", 5}, ShardInfo{"b.tar", 9}}).ok());
  fs::remove_all(dir + "/.stoker-index");  // as it was
  std::ofstream(dir + "/thesis.pdf") << "not a shard";
  auto refused = ShardCache::Open(dir, 1 << 20, EvictionOrder::kOldest, {ShardInfo{"a.tar", 5}, ShardInfo{"b.tar", 9}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("holds thesis.pdf"), std::string::npos) << refused.status().ToString();
  EXPECT_TRUE(fs::exists(dir + "/thesis.pdf"));
  fs::remove_all(dir);
}

TEST(Streaming, FullModeThroughTheCppLoaderEverySampleOnce) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("full");
  auto ds = StreamingDataset::Open(Options(dir, StreamingMode::kFull, 4 * ShardBytes(dir)));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), uint64_t{kShards * kPerShard});
  LoaderOptions lo;
  lo.batch_size = 7;
  lo.shuffle = true;
  lo.num_workers = 2;
  auto l = Loader::Create(ds.value(), lo);
  ASSERT_TRUE(l.ok());
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> ys = Epoch(*l.value());
    std::sort(ys.begin(), ys.end());
    ASSERT_EQ(ys.size(), size_t{kShards * kPerShard});
    for (int i = 0; i < kShards * kPerShard; ++i) ASSERT_EQ(ys[i], i);
  }
  const StreamingStats st = ds.value()->stats();
  EXPECT_EQ(st.evictions, 0u);  // what does not fit streams through memory
  EXPECT_GE(st.streamed, 2u * (kShards - 4));
  EXPECT_GE(st.hits, 3u);  // epoch 2 reads what the cache kept
  EXPECT_LE(st.used_bytes, 4 * ShardBytes(dir));
  EXPECT_EQ(st.seen_shards, uint64_t{kShards});
  l.value().reset();
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
    std::vector<int64_t> o = ds.value()->Order(SampleOrder{4, true, 9, r, 3, true});
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
  EXPECT_EQ(ds.value()->Order(SampleOrder{4, true, 9, 0, 1, true}), ds.value()->Order(SampleOrder{4, true, 9, 0, 1, true}));
  EXPECT_NE(ds.value()->Order(SampleOrder{4, true, 9, 0, 1, true}), ds.value()->Order(SampleOrder{5, true, 9, 0, 1, true}));
  ds.value().reset();
  fs::remove_all(dir);
}

TEST(Streaming, GrowingModeEpochsAreTheCachedShardsAndRepeatable) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string dir = MakeRemote("growing");
  StreamingOptions o = Options(dir, StreamingMode::kGrowing, 1 << 30);
  o.min_shards = 3;
  auto ds = StreamingDataset::Open(o);
  ASSERT_TRUE(ds.value() != nullptr) << ds.status().ToString();
  EXPECT_GE(ds.value()->epoch_shards().size(), 3u);
  LoaderOptions lo;
  lo.batch_size = 5;
  lo.shuffle = true;
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
  StreamingOptions o = Options(dir, StreamingMode::kGrowing, 1 << 30);
  auto ds1 = StreamingDataset::Open(o);
  ASSERT_TRUE(ds1.ok()) << ds1.status().ToString();
  ds1.value()->UseShards({"shard-1.tfrecord", "shard-2.tfrecord", "shard-5.tfrecord"});  // this epoch: these
  LoaderOptions lo;
  lo.batch_size = 5;
  lo.shuffle = true;
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
  o = Options(dir, StreamingMode::kGrowing, 100);
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("is larger than max_bytes"), std::string::npos);
  o = Options(dir, StreamingMode::kGrowing, 0);
  EXPECT_NE(StreamingDataset::Open(o).status().message().find("must be > 0 in mode 'growing'"), std::string::npos);
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

}  // namespace
}  // namespace stoker
