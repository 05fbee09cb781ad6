// loader/scheduler: dispatch, order, worker choice, retries and deaths, with real forked worker processes.
#include "loader/engine.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "fake_cuda.h"
#include "loader/scheduler.h"
#include "range_source.h"
#include "watchdog.h"
#include "forked_workers.h"

namespace stoker {
namespace {

using testing::RangeSource;
using testing::Watchdog;
using testing::VariableBytes;
using testing::MakeEngine;
using testing::ForkWorker;
using testing::Reap;

// Worker 0 is slow on even batches; in-order delivery must still be 0,1,2,...
TEST(Scheduler, InOrderDeliveryDespiteSlowWorker) {
  Watchdog dog(std::chrono::seconds(60), "InOrderDeliveryDespiteSlowWorker");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 4096, 2000), p1 = ForkWorker(e, 1, 4096, 2000);
  for (bool in_order : {true, false}) {
    Scheduler s(e, SchedulerOptions{2, 4, in_order, false});
    RangeSource src(200);
    s.Reset(&src, false);
    std::vector<uint64_t> seen;
    for (;;) {
      Outcome o;
      ASSERT_TRUE(s.Next(10'000'000'000, &o).ok());
      if (o.kind == Outcome::Kind::kEnd) break;
      ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
      uint64_t used, cap;
      const uint8_t* p = e->SlotRegion(o.slot, &used, &cap);
      EXPECT_EQ(p[0], static_cast<uint8_t>(o.batch_id & 0xff));
      seen.push_back(o.batch_id);
      src.Drop(o.token);
      e->MarkHeld(o.slot);
      e->Release(o.slot);
    }
    ASSERT_EQ(seen.size(), 200u);
    std::vector<uint64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(sorted[i], i);
    if (in_order) EXPECT_EQ(seen, sorted);
    EXPECT_EQ(src.dropped, 200);
  }
  Reap(e, {p0, p1});
}

// In order, batch k goes to worker k mod n (as torch assigns them), even when
// one worker is slow and a least-loaded pick would send it elsewhere: what a
// worker draws from its random streams then depends on nothing but k.
TEST(Scheduler, InOrderBatchKGoesToWorkerKModN) {
  Watchdog dog(std::chrono::seconds(60), "InOrderBatchKGoesToWorkerKModN");
  auto e = MakeEngine(3);
  pid_t p0 = ForkWorker(e, 0, 4096, 3000), p1 = ForkWorker(e, 1, 4096), p2 = ForkWorker(e, 2, 4096, 1000);
  Scheduler s(e, SchedulerOptions{3, 6, true, false});
  RangeSource src(120);
  s.Reset(&src, false);
  int n = 0;
  for (;;) {
    Outcome o;
    ASSERT_TRUE(s.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    EXPECT_EQ(o.worker, o.batch_id % 3) << "batch " << o.batch_id;
    ++n;
    src.Drop(o.token);
    e->MarkHeld(o.slot);
    e->Release(o.slot);
  }
  EXPECT_EQ(n, 120);
  Reap(e, {p0, p1, p2});
}

// The autotuner's worker counts: batch k goes to (k - s) mod n in the
// segment (s, n) of the schedule that holds it, segments start at the next
// batch never dispatched, a worker above the count is retired once idle
// (a clean exit, not a death) and a new process takes its id after Reclaim.
TEST(Scheduler, ActiveWorkersFollowTheScheduleAndRetireCleanly) {
  Watchdog dog(std::chrono::seconds(60), "ActiveWorkersFollowTheScheduleAndRetireCleanly");
  auto e = MakeEngine(3);
  std::vector<pid_t> pids = {ForkWorker(e, 0, 4096), ForkWorker(e, 1, 4096), ForkWorker(e, 2, 4096)};
  Scheduler s(e, SchedulerOptions{3, 6, true, false});
  EXPECT_FALSE(s.SetActiveWorkers(0).ok());
  EXPECT_FALSE(s.SetActiveWorkers(4).ok());
  ASSERT_TRUE(s.SetActiveWorkers(1).ok());
  RangeSource src(90);
  s.Reset(&src, false);
  ASSERT_EQ(s.schedule(), (std::vector<WorkerSegment>{{0, 1}}));
  std::vector<uint32_t> worker_of(90, 99);
  bool retired = false;
  for (;;) {
    Outcome o;
    ASSERT_TRUE(s.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch) << static_cast<int>(o.kind);
    worker_of[o.batch_id] = o.worker;
    src.Drop(o.token);
    e->MarkHeld(o.slot);
    e->Release(o.slot);
    if (o.batch_id == 20) ASSERT_TRUE(s.SetActiveWorkers(3).ok());
    if (o.batch_id == 50) {
      ASSERT_TRUE(s.SetActiveWorkers(2).ok());
      EXPECT_FALSE(s.RetireWorker(1).ok());  // active
    }
    if (o.batch_id > 50 && !retired && s.Idle(2)) {
      ASSERT_TRUE(s.RetireWorker(2).ok());
      int status = 0;
      ASSERT_EQ(waitpid(pids[2], &status, 0), pids[2]);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      ASSERT_TRUE(s.Reclaim(2).ok());
      pids[2] = ForkWorker(e, 2, 4096);  // (a new process for the id, watched: not used again this epoch)
      retired = true;
    }
  }
  EXPECT_TRUE(retired);
  const std::vector<WorkerSegment> sched = s.schedule();
  ASSERT_EQ(sched.size(), 3u);
  EXPECT_EQ(sched[0], (WorkerSegment{0, 1}));
  EXPECT_EQ(sched[1].workers, 3u);
  EXPECT_GT(sched[1].first, 20u);  // after the batches already in flight
  EXPECT_LE(sched[1].first, 27u);  // (prefetch 6)
  EXPECT_EQ(sched[2].workers, 2u);
  for (uint64_t k = 0; k < 90; ++k) {
    const WorkerSegment& seg = k >= sched[2].first ? sched[2] : k >= sched[1].first ? sched[1] : sched[0];
    EXPECT_EQ(worker_of[k], (k - seg.first) % seg.workers) << "batch " << k;
    EXPECT_EQ(s.WorkerOf(k), worker_of[k]);
    // The last batch before k of each worker, against a scan.
    for (uint32_t w = 0; w < 3; ++w) {
      int64_t want = -1;
      for (uint64_t j = 0; j < k; ++j)
        if (worker_of[j] == w) want = static_cast<int64_t>(j);
      EXPECT_EQ(s.PrevBatchOf(w, k), want) << "worker " << w << " before batch " << k;
    }
  }
  // A resumed run's saved segments are kept whole: a change lands after them.
  RangeSource src2(90);
  s.Reset(&src2, false);
  s.SetSchedule({{40, 3}, {60, 1}});
  EXPECT_EQ(s.active_workers(), 1u);
  EXPECT_FALSE(s.Idle(2));  // batches 40-59 of the saved segment are its too: it may not go yet
  EXPECT_FALSE(s.RetireWorker(2).ok());
  ASSERT_TRUE(s.SetActiveWorkers(2).ok());
  EXPECT_EQ(s.schedule(), (std::vector<WorkerSegment>{{40, 3}, {60, 2}}));
  s.Clear();
  Reap(e, pids);
}

// The batches in flight can be changed within an epoch (the Python loader
// deepens them once it knows its batches are small): more go out at once,

// Out of order, a worker stuck on its first batch holds no more than its
// share of the batches in flight (prefetch / workers, as torch's
// _try_put_index): the free worker never waits for a task, and delivers
// every other batch before the stuck one's.
TEST(Scheduler, OutOfOrderSlowWorkerHoldsOnlyItsShare) {
  Watchdog dog(std::chrono::seconds(60), "OutOfOrderSlowWorkerHoldsOnlyItsShare");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 4096, 0, 1'500'000), p1 = ForkWorker(e, 1, 4096);
  Scheduler s(e, SchedulerOptions{2, 6, false, false});
  RangeSource src(60);
  s.Reset(&src, false);
  std::vector<uint32_t> workers;
  for (;;) {
    Outcome o;
    ASSERT_TRUE(s.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    workers.push_back(o.worker);
    src.Drop(o.token);
    e->MarkHeld(o.slot);
    e->Release(o.slot);
  }
  ASSERT_EQ(workers.size(), 60u);
  // Worker 0 took at most 3 tasks (6 in flight, 2 workers) before its first
  // batch was done; worker 1 did the other 57 meanwhile.
  const size_t first0 = std::find(workers.begin(), workers.end(), 0u) - workers.begin();
  EXPECT_GE(first0, 57u);
  Reap(e, {p0, p1});
}

// and delivery stays complete and in order either way.
TEST(Scheduler, PrefetchChangesWithinAnEpoch) {
  Watchdog dog(std::chrono::seconds(60), "PrefetchChangesWithinAnEpoch");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 4096, 500), p1 = ForkWorker(e, 1, 4096, 500);
  Scheduler s(e, SchedulerOptions{2, 2, true, false});
  RangeSource src(100);
  s.Reset(&src, false);
  std::vector<uint64_t> seen;
  size_t most_in_flight = 0;
  for (;;) {
    Outcome o;
    ASSERT_TRUE(s.Next(10'000'000'000, &o).ok());
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    seen.push_back(o.batch_id);
    if (seen.size() == 10) s.SetPrefetch(16);
    if (seen.size() == 60) s.SetPrefetch(0);  // (at least one)
    if (seen.size() < 10) EXPECT_LE(s.QueueDepths().in_progress, 2u);
    most_in_flight = std::max(most_in_flight, s.QueueDepths().in_progress + s.QueueDepths().ready);
    src.Drop(o.token);
    e->MarkHeld(o.slot);
    e->Release(o.slot);
  }
  EXPECT_EQ(s.prefetch(), 1u);
  EXPECT_GT(most_in_flight, 2u);
  ASSERT_EQ(seen.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  Reap(e, {p0, p1});
}

// A batch a worker finished that waits for its turn is no longer the
// worker's: what a crash or a timeout report names as held is what is
// still being loaded.
TEST(Scheduler, InFlightTasksSayWhichAreFinished) {
  Watchdog dog(std::chrono::seconds(60), "InFlightTasksSayWhichAreFinished");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 4096, 300000), p1 = ForkWorker(e, 1, 4096);  // worker 0: 300 ms a batch
  Scheduler s(e, SchedulerOptions{2, 4, true, false});
  RangeSource src(4);
  s.Reset(&src, false);
  Outcome o;
  ASSERT_TRUE(s.Next(100'000'000, &o).ok());  // batch 0 is not done in 100 ms; 1 and 3 are
  ASSERT_EQ(o.kind, Outcome::Kind::kTimeout);
  std::vector<InFlight> f = s.InFlightTasks();
  ASSERT_EQ(f.size(), 4u);
  for (const InFlight& t : f) {
    EXPECT_EQ(t.worker, t.batch_id % 2);
    EXPECT_EQ(t.finished, t.worker == 1) << "batch " << t.batch_id;
  }
  for (int n = 0; n < 4;) {
    ASSERT_TRUE(s.Next(10'000'000'000, &o).ok());
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    ++n;
    src.Drop(o.token);
    e->MarkHeld(o.slot);
    e->Release(o.slot);
  }
  Reap(e, {p0, p1});
}

// Two workers that die before one wait ends are two outcomes: the second
// death was dropped, and the loop then waited forever for its batches.
TEST(Scheduler, TwoDeathsInOneWaitAreBothReported) {
  Watchdog dog(std::chrono::seconds(30), "TwoDeathsInOneWaitAreBothReported");
  auto e = MakeEngine(2);
  pid_t a = fork();
  if (a == 0) _exit(4);
  pid_t b = fork();
  if (b == 0) _exit(5);
  ASSERT_TRUE(e->Watch(0, a).ok());
  ASSERT_TRUE(e->Watch(1, b).ok());
  waitid(P_PID, a, nullptr, WEXITED | WNOWAIT);
  waitid(P_PID, b, nullptr, WEXITED | WNOWAIT);
  Scheduler s(e, SchedulerOptions{2, 4, true, false});
  RangeSource src(8);
  s.Reset(&src, false);
  std::vector<int> codes;
  for (int k = 0; k < 2; ++k) {
    Outcome o;
    ASSERT_TRUE(s.Next(5'000'000'000, &o).ok());
    ASSERT_EQ(o.kind, Outcome::Kind::kWorkerExit) << "death " << k;
    codes.push_back(o.exit.exit_code);
  }
  std::sort(codes.begin(), codes.end());
  EXPECT_EQ(codes, (std::vector<int>{4, 5}));
  for (uint32_t w = 0; w < 2; ++w) e->Forget(w);
  waitpid(a, nullptr, 0);
  waitpid(b, nullptr, 0);
}

// pin_memory with a GPU that never gets ahead on its own: every dropped
// batch's slot stays fenced, so the pool runs dry with nothing in flight.
// The scheduler must wait for the fences (Drain) rather than report that
// the loop holds the whole budget, or hang.
TEST(Scheduler, APoolFullOfFencedSlotsIsDrainedNotReportedAsHeld) {
  Watchdog dog(std::chrono::seconds(60), "APoolFullOfFencedSlotsIsDrainedNotReportedAsHeld");
  testing::FakeCuda::Reset();
  auto e = MakeEngine(2, 1 << 20);  // room for a few 100 KiB batches
  ASSERT_TRUE(e->EnableCuda(testing::FakeCuda::Api()).ok());
  pid_t p0 = ForkWorker(e, 0, 100 << 10), p1 = ForkWorker(e, 1, 100 << 10);
  Scheduler s(e, SchedulerOptions{2, 4, true, false});
  s.SetBlockingHooks([] { testing::FakeCuda::Get().blocking = true; },
                     [] { testing::FakeCuda::Get().blocking = false; });
  RangeSource src(60);
  s.Reset(&src, false);
  int stream = 0;
  uint64_t n = 0;
  for (;;) {
    ASSERT_EQ(e->RecordFence(&stream), 0);  // as the Python loop does before each batch
    Outcome o;
    Status st = s.Next(10'000'000'000, &o);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (o.kind == Outcome::Kind::kEnd) break;
    ASSERT_EQ(o.kind, Outcome::Kind::kBatch);
    ASSERT_FALSE(o.spilled);
    uint64_t used, cap;
    const uint8_t* p = e->SlotRegion(o.slot, &used, &cap);
    EXPECT_EQ(p[used - 1], static_cast<uint8_t>(o.batch_id & 0xff));
    EXPECT_EQ(o.batch_id, n++);
    src.Drop(o.token);
    e->MarkHeld(o.slot);
    e->Release(o.slot);
  }
  EXPECT_EQ(n, 60u);
  EXPECT_GE(testing::FakeCuda::Get().synchronizes, 1) << "the pool ran dry and was drained";
  EXPECT_EQ(testing::FakeCuda::Get().synchronizes_holding, 0)
      << "every wait for the GPU ran inside the blocking hooks (the GIL released)";
  s.Clear();
  Reap(e, {p0, p1});
}

// A tight budget with batch sizes that jump from 200 KiB to 1000 KiB and a
// slow worker: every batch arrives once, in order, intact, and the arena
// never grows past max_memory (batches are handed back when there is no
// room, and ready batches move out of the pool for the one the loop awaits).
// Runs the scenario once; its engine's stats.
EngineStats RunTightBudgetWithVaryingSizes() {
  const uint64_t kMax = 1536 * 1024;
  auto e = MakeEngine(2, kMax);
  pid_t p0 = ForkWorker(e, 0, 0, 3000), p1 = ForkWorker(e, 1, 0);
  Scheduler s(e, SchedulerOptions{2, 6, true, false});
  RangeSource src(300);
  s.Reset(&src, false);
  std::vector<uint64_t> seen;
  for (;;) {
    Outcome o;
    Status st = s.Next(30'000'000'000, &o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    if (o.kind == Outcome::Kind::kEnd) break;
    EXPECT_EQ(o.kind, Outcome::Kind::kBatch);
    const uint8_t* p;
    uint64_t used, cap;
    if (o.spilled) {
      p = reinterpret_cast<const uint8_t*>(o.spilled->data());
      used = o.spilled->size();
    } else {
      p = e->SlotRegion(o.slot, &used, &cap);
    }
    EXPECT_EQ(used, VariableBytes(static_cast<int64_t>(o.batch_id)));
    EXPECT_EQ(p[0], static_cast<uint8_t>(o.batch_id & 0xff));
    EXPECT_EQ(p[used - 1], static_cast<uint8_t>(o.batch_id & 0xff));
    seen.push_back(o.batch_id);
    src.Drop(o.token);
    if (!o.spilled) {
      e->MarkHeld(o.slot);
      e->Release(o.slot);
    }
    EXPECT_LE(e->arena().ResidentBytes(), kMax);
  }
  EXPECT_EQ(seen.size(), 300u);
  for (uint64_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(src.dropped, 300);
  EngineStats st = e->Stats();
  std::printf("cancelled=%llu spills=%llu need_space=%llu\n", (unsigned long long)st.cancelled,
              (unsigned long long)st.spills, (unsigned long long)st.need_space_events);
  s.Clear();
  Reap(e, {p0, p1});
  return st;
}

TEST(Scheduler, TightBudgetWithVaryingSizesNeverExceedsIt) {
  Watchdog dog(std::chrono::seconds(120), "TightBudgetWithVaryingSizes");
  // Whether tasks are handed back depends on timing: every run is checked in
  // full, and up to three are run until one did.  (With batch k on worker
  // k mod 2, the slow worker always has a task in progress, so ready batches
  // rarely have to move out here; tests/python/test_memory.py's
  // test_tight_pool_with_growing_batches_delivers_everything_once provokes that.)
  EngineStats st = RunTightBudgetWithVaryingSizes();
  for (int again = 0; again < 2 && st.cancelled == 0 && !HasFailure(); ++again) st = RunTightBudgetWithVaryingSizes();
  EXPECT_GT(st.cancelled, 0u) << "the test should exercise handing tasks back";
}

}  // namespace
}  // namespace stoker
