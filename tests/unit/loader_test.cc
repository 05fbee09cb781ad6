// The C++ API: stoker::Loader over native datasets and a user-defined one,
// in threads and forked processes; order, sharding, errors, worker death,
// timeouts, resume.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "io/tfrecord_file.h"
#include "stoker/loader.h"
#include "counting_dataset.h"
#include "watchdog.h"

namespace stoker {
namespace {

using testing::Counting;

std::vector<int64_t> Epoch(Loader& l, Status* st = nullptr) {
  std::vector<int64_t> seen;
  for (const Batch& b : l) {
    const BatchField* f = b.field("i");
    EXPECT_NE(f, nullptr);
    const int64_t* v = f->tensor.as<int64_t>();
    const float* x = b.field("f")->tensor.as<float>();
    EXPECT_EQ(b.field("f")->tensor.shape, (std::vector<int64_t>{static_cast<int64_t>(b.size()), 2}));
    for (uint64_t k = 0; k < b.size(); ++k) {
      seen.push_back(v[k]);
      EXPECT_EQ(x[2 * k + 1], static_cast<float>(v[k]) + 0.5f);
    }
  }
  if (st) *st = l.status();
  return seen;
}

void ExpectPermutation(std::vector<int64_t> v, uint64_t n) {
  std::sort(v.begin(), v.end());
  ASSERT_EQ(v.size(), n);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], static_cast<int64_t>(i));
}

class LoaderModes : public ::testing::TestWithParam<bool> {};

TEST_P(LoaderModes, EveryIndexOncePerEpochInASeededOrder) {
  testing::Watchdog wd(std::chrono::seconds(60));
  LoaderOptions o;
  o.batch_size = 7;
  o.seeded_shuffle = true;
  o.seed = 11;
  o.num_workers = 2;
  o.use_processes = GetParam();
  auto l = Loader::Create(std::make_shared<Counting>(100), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l.value()->batches_per_epoch(), 15u);
  EXPECT_EQ(l.value()->worker_pids().size(), GetParam() ? 2u : 0u);
  Status st;
  auto e0 = Epoch(*l.value(), &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectPermutation(e0, 100);
  auto e1 = Epoch(*l.value());
  ExpectPermutation(e1, 100);
  EXPECT_NE(e0, e1) << "each epoch has its own order";
  // Another loader with the same seed: the same orders.
  auto l2 = Loader::Create(std::make_shared<Counting>(100), o);
  EXPECT_EQ(Epoch(*l2.value()), e0);
  l2.value()->SetEpoch(1);
  EXPECT_EQ(Epoch(*l2.value()), e1);
  EXPECT_EQ(l.value()->stats().batches_delivered, 30u);
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndProcesses, LoaderModes, ::testing::Values(false, true));

TEST(Loader, RanksShareAnEpochLikeDistributedSampler) {
  testing::Watchdog wd(std::chrono::seconds(60));
  std::vector<int64_t> all;
  for (uint32_t r = 0; r < 3; ++r) {
    LoaderOptions o;
    o.batch_size = 4;
    o.seeded_shuffle = true;
    o.rank = r;
    o.world_size = 3;
    auto l = Loader::Create(std::make_shared<Counting>(10), o);
    auto mine = Epoch(*l.value());
    EXPECT_EQ(mine.size(), 4u);  // ceil(10 / 3), padded
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::set<int64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), 10u);  // every sample; two repeated as padding
  EXPECT_EQ(all.size(), 12u);
  LoaderOptions bad;
  bad.rank = 3;
  bad.world_size = 3;
  auto refused = Loader::Create(std::make_shared<Counting>(10), bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rank 3 is not below world_size 3"), std::string::npos);
}

TEST(Loader, AFailedBatchIsNamedAndTheEpochGoesOn) {
  testing::Watchdog wd(std::chrono::seconds(60));
  auto ds = std::make_shared<Counting>(40);
  ds->fail_13_ = true;
  LoaderOptions o;
  o.batch_size = 5;
  o.num_workers = 2;
  auto l = Loader::Create(ds, o);
  Batch b;
  bool end = false;
  std::vector<uint64_t> ids;
  Status failure;
  for (;;) {
    Status st = l.value()->Next(&b, &end);
    if (!st.ok()) {
      failure = st;
      continue;
    }
    if (end) break;
    ids.push_back(b.id());
  }
  EXPECT_TRUE(failure.IsDataLoss());
  EXPECT_NE(failure.message().find("sample 13 is bad on purpose (while loading batch 2 of epoch 0 in worker"),
            std::string::npos) << failure.message();
  EXPECT_NE(failure.message().find("indices [10, 11, 12, 13, 14]"), std::string::npos);
  EXPECT_EQ(ids, (std::vector<uint64_t>{0, 1, 3, 4, 5, 6, 7}));
}

TEST(Loader, AKilledWorkerProcessIsNamed) {
  testing::Watchdog wd(std::chrono::seconds(60));
  LoaderOptions o;
  o.batch_size = 1;
  o.num_workers = 2;
  o.use_processes = true;
  auto l = Loader::Create(std::make_shared<Counting>(1000, 500), o);  // sample 500 sleeps 3 s
  Batch b;
  bool end = false;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(l.value()->Next(&b, &end).ok());
  const int victim = l.value()->worker_pids()[1];
  kill(victim, SIGKILL);
  Status st;
  for (int i = 0; i < 2000 && st.ok(); ++i) st = l.value()->Next(&b, &end);
  ASSERT_EQ(st.code(), Status::Code::kWorkerDied) << st.ToString();
  EXPECT_NE(st.message().find("worker process 1 (pid " + std::to_string(victim) + ") was killed by signal 9"),
            std::string::npos) << st.message();
  EXPECT_EQ(l.value()->Next(&b, &end).code(), Status::Code::kWorkerDied);  // and stays so
}

TEST(Loader, TimeoutNamesTheBatchInFlight) {
  testing::Watchdog wd(std::chrono::seconds(60));
  LoaderOptions o;
  o.batch_size = 2;
  o.timeout_s = 0.5;
  auto l = Loader::Create(std::make_shared<Counting>(20, 4), o);  // batch 2 holds sample 4: 3 s
  Batch b;
  bool end = false;
  Status st;
  for (int i = 0; i < 5 && st.ok(); ++i) st = l.value()->Next(&b, &end);
  ASSERT_TRUE(st.IsTimeout()) << st.ToString();
  EXPECT_NE(st.message().find("batch 2 on worker 0"), std::string::npos) << st.message();
}

TEST(Loader, StateRestoresExactlyAcrossLoaders) {
  testing::Watchdog wd(std::chrono::seconds(60));
  LoaderOptions o;
  o.batch_size = 3;
  o.seeded_shuffle = true;
  o.seed = 5;
  o.num_workers = 2;
  auto full = Loader::Create(std::make_shared<Counting>(50), o);
  Epoch(*full.value());  // epoch 0
  auto want = Epoch(*full.value());  // epoch 1
  auto a = Loader::Create(std::make_shared<Counting>(50), o);
  Epoch(*a.value());
  Batch b;
  bool end = false;
  std::vector<int64_t> got;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(a.value()->Next(&b, &end).ok());
    for (uint64_t k = 0; k < b.size(); ++k) got.push_back(b.field("i")->tensor.as<int64_t>()[k]);
  }
  const std::string saved = a.value()->state().Serialize();
  auto state = LoaderState::Parse(saved);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  auto resumed = Loader::Create(std::make_shared<Counting>(50), o);
  ASSERT_TRUE(resumed.value()->Restore(state.value()).ok());
  auto rest = Epoch(*resumed.value());
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, want);
  EXPECT_FALSE(LoaderState::Parse("junk").ok());
  LoaderOptions other = o;
  other.batch_size = 4;
  auto mismatch = Loader::Create(std::make_shared<Counting>(50), other);
  Status r = mismatch.value()->Restore(state.value());
  EXPECT_NE(r.message().find("saved with batch_size 3, this loader has 4"), std::string::npos) << r.message();
}

TEST(Loader, TFRecordThroughTheCppApi) {
  testing::Watchdog wd(std::chrono::seconds(60));
  const std::string path = ::testing::TempDir() + "loader_" + std::to_string(getpid()) + ".tfrecord";
  {
    std::string file;
    for (int i = 0; i < 9; ++i) {
      // Example{features{feature{key "y" value{int64_list{value: i}}}}}
      std::string ilist = std::string("\x0a\x01", 2) + static_cast<char>(i);
      std::string feature = "\x1a" + std::string(1, static_cast<char>(ilist.size())) + ilist;
      std::string entry = "\x0a\x01y\x12" + std::string(1, static_cast<char>(feature.size())) + feature;
      std::string feats = "\x0a" + std::string(1, static_cast<char>(entry.size())) + entry;
      std::string ex = "\x0a" + std::string(1, static_cast<char>(feats.size())) + feats;
      AppendTFRecord(&file, ex.data(), ex.size());
    }
    std::ofstream(path, std::ios::binary) << file;
  }
  auto ds = OpenTFRecord({path}, {{"y", ElementType::kInt64, {}}});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  LoaderOptions o;
  o.batch_size = 4;
  auto l = Loader::Create(ds.value(), o);
  std::vector<int64_t> ys;
  for (const Batch& b : *l.value())
    for (uint64_t k = 0; k < b.size(); ++k) ys.push_back(b.field("y")->tensor.as<int64_t>()[k]);
  EXPECT_EQ(ys, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  std::remove(path.c_str());
  std::remove((path + ".stoker-index").c_str());
}

}  // namespace
}  // namespace stoker
