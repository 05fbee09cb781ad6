// cache/shard_cache: whole shards under a byte budget, shared by processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "cache/lock_fd.h"
#include "cache/shard_cache.h"
#include "core/unique_fd.h"
#include "io/crc32c.h"
#include "stoker/loader.h"
#include "stoker/shard_index.h"
#include "stoker/streaming.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

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

namespace stamps {

std::string StampOf(const std::string& path) {
  char buf[128] = {0};
  const ssize_t n = getxattr(path.c_str(), ShardCache::kStampAttr, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// What a power cut leaves of a shard written without fsync in an earlier
// boot: its name and size, its stamp, and zeros where its pages never
// reached the disk.
void TearAsAPowerCutWould(const std::string& path, bool zero_a_page) {
  const std::string stamp = StampOf(path);
  ASSERT_FALSE(stamp.empty());
  const std::string earlier = stamp.substr(0, 8) + " 00000000-0000-4000-8000-000000000000";
  ASSERT_EQ(setxattr(path.c_str(), ShardCache::kStampAttr, earlier.data(), earlier.size(), 0), 0);
  if (zero_a_page) {
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
    const std::string zeros(4096, '\0');
    ASSERT_EQ(pwrite(fd.get(), zeros.data(), zeros.size(), 8192), 4096);
  }
}

}  // namespace stamps

TEST(ShardCache, AShardIsStampedWithItsCrcAndBootInsteadOfFsynced) {
  auto c = MakeCacheOverFiles("stamp", 1 << 20, {{"a.tar", 20000}});
  auto pin = c.cache->Fetch(*c.store, ShardInfo{"a.tar", 20000});
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  const std::string stamp = stamps::StampOf(pin->path());
  if (stamp.empty()) GTEST_SKIP() << "this file system keeps no user extended attributes (the shard was fsynced)";
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", Crc32c(std::string(20000, 'a').data(), 20000));
  EXPECT_EQ(stamp, std::string(crc) + " " + ShardCache::BootId());
  // durable: fsynced, no stamp.
  auto durable = ShardCache::Open(c.dir + "/durable", 1 << 20, EvictionOrder::kOldest, {}, /*durable=*/true);
  ASSERT_TRUE(durable.ok());
  auto dpin = durable.value()->Fetch(*c.store, ShardInfo{"a.tar", 20000});
  ASSERT_TRUE(dpin.ok());
  EXPECT_EQ(stamps::StampOf(dpin->path()), "");
  fs::remove_all(c.dir);
}

TEST(ShardCache, AShardTornByAPowerCutIsFoundOnFirstUseAndFetchedAgain) {
  auto c = MakeCacheOverFiles("torn", 1 << 20, {{"a.tar", 20000}, {"b.tar", 20000}});
  for (const char* n : {"a.tar", "b.tar"}) ASSERT_TRUE(c.cache->Fetch(*c.store, ShardInfo{n, 20000}).ok());
  if (stamps::StampOf(c.dir + "/cache/a.tar").empty()) GTEST_SKIP() << "no user extended attributes here";
  stamps::TearAsAPowerCutWould(c.dir + "/cache/a.tar", /*zero_a_page=*/true);   // torn
  stamps::TearAsAPowerCutWould(c.dir + "/cache/b.tar", /*zero_a_page=*/false);  // whole
  // After the reboot: a new cache (another process) over the directory.
  auto after = ShardCache::Open(c.dir + "/cache", 1 << 20, EvictionOrder::kOldest);
  ASSERT_TRUE(after.ok());
  ShardCache& cache = *after.value();
  auto a = cache.Fetch(*c.store, ShardInfo{"a.tar", 20000});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->downloaded());  // fetched again
  std::ifstream in(a->path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, std::string(20000, 'a'));
  auto b = cache.Fetch(*c.store, ShardInfo{"b.tar", 20000});
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->downloaded());  // checked, whole: a hit
  EXPECT_EQ(cache.verified(), 2u);
  EXPECT_EQ(cache.torn(), 1u);
  EXPECT_EQ(cache.downloads(), 1u);
  // Both carry this boot's stamp now: the next use does not read them through.
  for (const char* n : {"a.tar", "b.tar"})
    EXPECT_NE(stamps::StampOf(c.dir + "/cache/" + n).find(ShardCache::BootId()), std::string::npos) << n;
  ASSERT_TRUE(cache.Fetch(*c.store, ShardInfo{"b.tar", 20000}).ok());
  EXPECT_EQ(cache.verified(), 2u);
  fs::remove_all(c.dir);
}

}  // namespace
}  // namespace stoker
