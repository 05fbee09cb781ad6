// loader/native_workers: C++ threads fill slots through the Scheduler.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/record_file_dataset.h"
#include "collate/native_collate.h"
#include "loader/native_workers.h"
#include "loader/scheduler.h"
#include "range_source.h"
#include "watchdog.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::TempFile;
using testing::Floats;

TEST(NativeWorkers, ThreadsFillSlotsInOrder) {
  testing::Watchdog dog(std::chrono::seconds(60), "NativeWorkers");
  const std::string path = TempFile("nw", Floats(4 * 100));
  std::shared_ptr<NativeDataset> ds(RecordFileDataset::OpenRaw(path, ElementType::kFloat32, {4}).value());
  auto engine = Engine::Create(EngineOptions{2, 16 << 20, 64}).value();
  NativeWorkers workers(engine, ds);
  Scheduler sched(engine, SchedulerOptions{2, 4, true, false});
  testing::RangeSource src(100, 8);
  sched.Reset(&src, false);
  int batches = 0;
  for (;;) {
    Outcome o;
    ASSERT_TRUE(sched.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    uint64_t used, cap;
    const uint8_t* p = engine->SlotRegion(o.slot, &used, &cap);
    NativeCollate layout(ds->fields(), o.batch_id == 12 ? 4 : 8);
    EXPECT_EQ(used, layout.total_bytes());
    float first;
    std::memcpy(&first, layout.Sample(const_cast<uint8_t*>(p), 0, 0), 4);
    EXPECT_EQ(first, static_cast<float>(o.batch_id * 8 * 4)) << "batch " << o.batch_id;
    engine->MarkHeld(o.slot);
    engine->Release(o.slot);
    ++batches;
  }
  EXPECT_EQ(batches, 13);
  sched.Clear();
  workers.Stop();
  std::remove(path.c_str());
}

// The autotuner's reader threads: a thread per active worker, started as
// the count rises, retired (its ring closed, joined) and reclaimed as it
// falls, and started again for the same id; every batch once, in order.
TEST(NativeWorkers, ThreadsStartAndRetireWithTheSchedule) {
  testing::Watchdog dog(std::chrono::seconds(60), "ThreadsStartAndRetireWithTheSchedule");
  const std::string path = TempFile("nw2", Floats(4 * 800));
  std::shared_ptr<NativeDataset> ds(RecordFileDataset::OpenRaw(path, ElementType::kFloat32, {4}).value());
  auto engine = Engine::Create(EngineOptions{3, 16 << 20, 64}).value();
  NativeWorkers workers(engine, ds, ReaderPriority::kNormal, /*start=*/1);
  EXPECT_TRUE(workers.running(0));
  EXPECT_FALSE(workers.running(1));
  EXPECT_FALSE(workers.Start(3).ok());
  Scheduler sched(engine, SchedulerOptions{3, 6, true, false});
  ASSERT_TRUE(sched.SetActiveWorkers(1).ok());
  testing::RangeSource src(800, 8);
  sched.Reset(&src, false);
  uint64_t expect = 0;
  int retired = 0;
  for (;;) {
    Outcome o;
    ASSERT_TRUE(sched.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    EXPECT_EQ(o.batch_id, expect++);
    EXPECT_EQ(o.worker, sched.WorkerOf(o.batch_id));
    engine->MarkHeld(o.slot);
    engine->Release(o.slot);
    if (o.batch_id == 10 || o.batch_id == 60) {
      ASSERT_TRUE(workers.Start(1).ok());
      ASSERT_TRUE(workers.Start(2).ok());
      ASSERT_TRUE(sched.SetActiveWorkers(3).ok());
    }
    if (o.batch_id == 30 || o.batch_id == 80) ASSERT_TRUE(sched.SetActiveWorkers(1).ok());
    for (uint32_t w : {1u, 2u}) {
      if (sched.active_workers() > w || !workers.running(w) || !sched.Idle(w)) continue;
      ASSERT_TRUE(sched.RetireWorker(w).ok());
      workers.Join(w);  // (it leaves at once: its ring is closed)
      EXPECT_FALSE(workers.running(w));
      ASSERT_TRUE(sched.Reclaim(w).ok());
      ++retired;
    }
  }
  EXPECT_EQ(expect, 100u);
  EXPECT_EQ(retired, 4);  // each of the two, twice
  EXPECT_EQ(sched.schedule().size(), 5u);
  sched.Clear();
  workers.Stop();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace stoker
