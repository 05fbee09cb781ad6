// loader/epoch_runner: an epoch begun from a dataset, an order or a source,
// with the counts and the resume point, against forked worker processes.
#include "loader/epoch_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "counting_dataset.h"
#include "forked_workers.h"
#include "range_source.h"
#include "watchdog.h"

namespace stoker {
namespace {

using testing::ForkWorker;
using testing::MakeEngine;
using testing::Reap;
using testing::Watchdog;

TEST(EpochRunner, Counts) {
  EXPECT_EQ(EpochRunner::SamplesPerRank(10, 3, true), 4u);   // padded: 12 over 3
  EXPECT_EQ(EpochRunner::SamplesPerRank(10, 3, false), 3u);  // the tail dropped
  EXPECT_EQ(EpochRunner::SamplesPerRank(0, 4, true), 0u);
  EXPECT_EQ(EpochRunner::SamplesPerRank(7, 1, true), 7u);
  EXPECT_EQ(EpochRunner::Batches(10, 3, false), 4u);
  EXPECT_EQ(EpochRunner::Batches(10, 3, true), 3u);
  EXPECT_EQ(EpochRunner::Batches(10, 0, true), 10u);  // batch_size=None: no batch to drop
  EXPECT_EQ(EpochRunner::Batches(0, 5, false), 0u);
}

// Every batch id delivered in an epoch, in the order delivered.
std::vector<uint64_t> Drain(Scheduler& s, Engine& e, IndexSource& src) {
  std::vector<uint64_t> ids;
  for (;;) {
    Outcome o;
    EXPECT_TRUE(s.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    EXPECT_EQ(o.kind, Outcome::Kind::kBatch);
    if (o.kind != Outcome::Kind::kBatch) break;
    ids.push_back(o.batch_id);
    src.Drop(o.token);
    e.MarkHeld(o.slot);
    e.Release(o.slot);
  }
  return ids;
}

class Recorder : public testing::Counting {
 public:
  using Counting::Counting;
  Status BeginEpoch(uint64_t epoch) override {
    begun.push_back(epoch);
    return Counting::BeginEpoch(epoch);
  }
  std::vector<uint64_t> begun;
};

TEST(EpochRunner, BeginsTheDatasetsEpochAndServesItsOrder) {
  Watchdog dog(std::chrono::seconds(60), "BeginsTheDatasetsEpochAndServesItsOrder");
  auto e = MakeEngine(1);
  pid_t p = ForkWorker(e, 0, 512);
  Scheduler s(e, SchedulerOptions{1, 4, true, false});
  EpochRunner r(&s);
  Recorder ds(10);
  OrderRecipe recipe{3, true, 7, 1, 2, true};  // epoch 3, shuffled, rank 1 of 2
  ASSERT_TRUE(r.Begin(ds, recipe, 2, false).ok());
  EXPECT_EQ(ds.begun, (std::vector<uint64_t>{3}));
  EXPECT_TRUE(r.native());
  EXPECT_EQ(r.source().samples(), EpochRunner::SamplesPerRank(10, 2, true));
  EXPECT_EQ(r.source().batches(), 3u);
  std::vector<int64_t> served;
  for (uint64_t t = 1; t <= 3; ++t)
    for (int64_t i : r.source().BatchIndices(t)) served.push_back(i);
  EXPECT_EQ(served, ds.Order(recipe));
  EXPECT_EQ(Drain(s, *e, *r.active()), (std::vector<uint64_t>{0, 1, 2}));
  Reap(e, {p});
}

TEST(EpochRunner, AResumePointSkipsWhatWasDeliveredOnce) {
  Watchdog dog(std::chrono::seconds(60), "AResumePointSkipsWhatWasDeliveredOnce");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 512), p1 = ForkWorker(e, 1, 512);
  Scheduler s(e, SchedulerOptions{2, 4, true, false});
  EpochRunner r(&s);
  std::vector<int64_t> order(20);
  for (int64_t i = 0; i < 20; ++i) order[i] = 19 - i;
  r.ResumeAt(ResumePoint{3, {5, 8}});
  ASSERT_TRUE(r.pending().has_value());
  r.Begin(std::make_shared<VectorOrder>(order), 2, false, false);
  EXPECT_FALSE(r.pending().has_value());  // applied once
  EXPECT_EQ(Drain(s, *e, *r.active()), (std::vector<uint64_t>{3, 4, 6, 7, 9}));
  // The next epoch is whole; Forget() drops a point never applied.
  r.ResumeAt(ResumePoint{9, {}});
  r.Forget();
  r.Begin(std::make_shared<VectorOrder>(order), 2, false, true);
  EXPECT_EQ(Drain(s, *e, *r.active()).size(), 10u);
  // An outside source resumes the same way.
  testing::RangeSource src(6);
  r.ResumeAt(ResumePoint{2, {}});
  r.Begin(&src, true);
  EXPECT_FALSE(r.native());
  EXPECT_EQ(Drain(s, *e, *r.active()), (std::vector<uint64_t>{2, 3, 4, 5}));
  Reap(e, {p0, p1});
}

}  // namespace
}  // namespace stoker
