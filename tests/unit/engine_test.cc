// loader/engine: slot life cycle, space requests, worker death, with real forked worker processes.
#include "loader/engine.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "loader/worker_port.h"
#include "watchdog.h"
#include "forked_workers.h"

namespace stoker {
namespace {

using testing::Watchdog;
using testing::MakeEngine;
using testing::ForkWorker;
using testing::Reap;

// Dispatch that must succeed; returns the slot.
uint32_t MustDispatch(const std::shared_ptr<Engine>& e, uint32_t w, uint64_t batch, int64_t idx) {
  uint32_t slot = ~0u;
  auto sent = e->Dispatch(w, batch, 1, TaskKind::kIndices, &idx, 8, &slot);
  EXPECT_TRUE(sent.ok() && sent.value()) << (sent.ok() ? "busy" : sent.status().ToString());
  return slot;
}

TEST(Engine, SlotLifeCycleWithSpaceRequest) {
  Watchdog dog(std::chrono::seconds(30), "SlotLifeCycleWithSpaceRequest");
  auto e = MakeEngine(1);
  const uint64_t kBytes = 300 * 1024;  // more than the first region (64 KiB)
  pid_t pid = ForkWorker(e, 0, kBytes);
  const uint32_t slot = MustDispatch(e, 0, 0, 7);
  std::vector<Completion> done;
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].slot, slot);
  EXPECT_EQ(done[0].batch_id, 0u);
  uint64_t used, cap;
  const uint8_t* p = e->SlotRegion(slot, &used, &cap);
  EXPECT_EQ(used, kBytes);
  EXPECT_GE(cap, kBytes);
  EXPECT_EQ(p[0], 7);
  EXPECT_EQ(p[kBytes - 1], 7);
  EXPECT_TRUE(e->arena().Contains(p, used));
  EngineStats st = e->Stats();
  EXPECT_EQ(st.need_space_events, 1u);
  EXPECT_EQ(st.slots_ready, 1u);
  e->MarkHeld(slot);
  EXPECT_EQ(e->Stats().slots_held, 1u);
  e->Release(slot);
  st = e->Stats();
  EXPECT_EQ(st.slots_held, 0u);
  EXPECT_EQ(st.held_bytes, 0u);
  // The next batch reuses the warm, big-enough slot: no new space request.
  EXPECT_EQ(MustDispatch(e, 0, 1, 9), slot);
  done.clear();
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  EXPECT_EQ(e->Stats().need_space_events, 1u);
  e->Release(done[0].slot);
  Reap(e, {pid});
}

// Regions past the budget are "busy", never handed out; what the arena holds
// stays within max_memory.
void ExpectBudgetIsAHardBound(bool process_shared) {
  const uint64_t kMax = 256 * 1024;
  EngineOptions o{1, kMax, 64};
  o.process_shared = process_shared;
  auto made = Engine::Create(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto e = made.value();
  EXPECT_EQ(e->arena().process_shared(), process_shared);
  EXPECT_LT(e->budget(), kMax) << "the control area is part of max_memory";
  const uint64_t fit = e->budget() / Engine::kMinRegion;
  int64_t idx = 0;
  uint64_t ok = 0;
  for (int i = 0; i < 8; ++i) {
    uint32_t slot;
    auto sent = e->Dispatch(0, i, 1, TaskKind::kIndices, &idx, 8, &slot);
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    if (sent.value()) ++ok;
  }
  EXPECT_EQ(ok, fit) << "no room is 'busy', never past the budget";
  const uint64_t dispatched = e->arena().ResidentBytes();
  EXPECT_LT(dispatched, fit * Engine::kMinRegion) << "the engine leaves a worker's regions for it to back";
  // The worker backs each region it is handed before writing into it.
  WorkerPort port(std::shared_ptr<Arena>(e, &e->arena()), 0);
  for (uint64_t i = 0; i < fit; ++i) {
    Task t;
    ASSERT_TRUE(port.Next(&t, 1'000'000'000).ok());
    auto region = port.Reserve(t.slot, Engine::kMinRegion);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
  }
  EXPECT_GE(e->arena().ResidentBytes(), fit * Engine::kMinRegion) << "regions are backed before they are written";
  EXPECT_LE(e->arena().ResidentBytes(), kMax);
  e->Shutdown();
}

TEST(Engine, BudgetIsAHardBound) { ExpectBudgetIsAHardBound(true); }

TEST(Engine, BudgetIsAHardBoundForAPrivateArenaToo) { ExpectBudgetIsAHardBound(false); }

// A batch is copied out of the pool when handing it over would leave too
// little room for a batch per worker: per worker taking batches now (the
// autotuner's active count), not per worker the arena could hold.
TEST(Engine, CopyOutLeavesRoomForTheActiveWorkersOnly) {
  auto e = Engine::Create(EngineOptions{8, 64 << 20, 64}).value();
  uint32_t slot = 0;
  ASSERT_TRUE(e->AcquireLocal(10 << 20, &slot).value());
  e->CompleteLocal(slot, 10 << 20);  // (the pool learns 10 MiB batches)
  EXPECT_TRUE(e->ShouldCopyOut(slot));  // 8 workers' batches would not fit beside it
  uint32_t again = 0;
  ASSERT_TRUE(e->AcquireLocal(10 << 20, &again).value());
  e->CompleteLocal(again, 10 << 20);
  e->SetActiveWorkers(2);
  EXPECT_FALSE(e->ShouldCopyOut(again));  // 2 workers' do
}

TEST(Engine, TooSmallMaxMemoryIsAClearError) {
  auto e = Engine::Create(EngineOptions{4, 64 * 1024, 1024});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("max_memory=65536"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("raise max_memory"), std::string::npos) << e.status().message();
}

TEST(Engine, MaxMemoryBeyondTheMachineIsAClearError) {
  auto e = Engine::Create(EngineOptions{1, uint64_t{1} << 60, 64});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(e.status().message().find("more than this machine can hold"), std::string::npos) << e.status().message();
}

// A batch larger than the whole budget: the worker is told "never" and gets a
// message naming the sizes and the option.
TEST(Engine, BatchLargerThanTheBudgetIsReportedToTheWorker) {
  Watchdog dog(std::chrono::seconds(30), "BatchLargerThanTheBudget");
  auto e = MakeEngine(1, 1 << 20);
  pid_t pid = fork();
  if (pid == 0) {
    WorkerPort port(std::shared_ptr<Arena>(e, &e->arena()), 0);
    Task t;
    if (!port.Next(&t, -1).ok()) _exit(2);
    auto r = port.Reserve(t.slot, 2 << 20);
    const std::string& m = r.status().message();
    const bool clear = r.status().IsResourceExhausted() && m.find("2097152 bytes") != std::string::npos &&
                       m.find("max_memory=1048576") != std::string::npos && m.find("raise max_memory") != std::string::npos;
    port.Publish(t.slot, SlotResult::kError, 0);
    _exit(clear ? 0 : 4);
  }
  ASSERT_TRUE(e->Watch(0, pid).ok());
  MustDispatch(e, 0, 0, 1);
  std::vector<Completion> done;
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  // (The worker exits right after: its exit may come in the same Wait.)
  std::erase_if(done, [](const Completion& c) { return c.kind == Completion::Kind::kWorkerExit; });
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].result, SlotResult::kError);
  e->Forget(0);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "worker status " << st;
  EXPECT_LE(e->arena().ResidentBytes(), uint64_t{1} << 20);
  e->Shutdown();
}

// No room now for a batch that outgrew its region: the task is handed back
// (kCancelled), and the engine has learnt its size for the next dispatch.
TEST(Engine, NoRoomNowHandsTheTaskBack) {
  Watchdog dog(std::chrono::seconds(30), "NoRoomNowHandsTheTaskBack");
  auto e = MakeEngine(1, 1 << 20);
  const uint64_t kBig = e->budget() - 4096;  // fits alone, not beside another region
  pid_t big = ForkWorker(e, 0, kBig);
  MustDispatch(e, 0, 0, 1);  // two 64 KiB regions: the first batch to grow
  MustDispatch(e, 0, 1, 2);  // cannot have the budget while the other holds one
  std::vector<Completion> done;
  std::vector<SlotResult> results;
  while (results.size() < 2) {
    done.clear();
    ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
    for (auto& c : done) results.push_back(c.result);
  }
  // The first got the whole budget only if the second's region was freed
  // first; either way at least one was handed back, and nothing exceeded it.
  EXPECT_NE(std::count(results.begin(), results.end(), SlotResult::kCancelled), 0);
  EXPECT_GE(e->Stats().cancelled, 1u);
  EXPECT_GE(e->Stats().expected_batch_bytes, kBig) << "the size was learnt";
  EXPECT_LE(e->arena().ResidentBytes(), uint64_t{1} << 20);
  Reap(e, {big});
}

TEST(Engine, ReportsWorkerDeathPromptly) {
  Watchdog dog(std::chrono::seconds(30), "ReportsWorkerDeathPromptly");
  auto e = MakeEngine(2);
  pid_t a = fork();
  if (a == 0) {
    pause();
    _exit(0);
  }
  pid_t b = fork();
  if (b == 0) _exit(3);
  ASSERT_TRUE(e->Watch(0, a).ok());
  ASSERT_TRUE(e->Watch(1, b).ok());
  std::vector<Completion> done;
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, Completion::Kind::kWorkerExit);
  EXPECT_EQ(done[0].worker, 1u);
  EXPECT_EQ(done[0].exit.exit_code, 3);
  kill(a, SIGKILL);
  const int64_t t0 = MonotonicNanos();
  done.clear();
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  EXPECT_LT(MonotonicNanos() - t0, 1'000'000'000);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].worker, 0u);
  EXPECT_EQ(done[0].exit.signal, SIGKILL);
  waitpid(a, nullptr, 0);
  waitpid(b, nullptr, 0);
}

TEST(Engine, ShutdownReleasesBlockedWorkers) {
  Watchdog dog(std::chrono::seconds(30), "ShutdownReleasesBlockedWorkers");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 1024), p1 = ForkWorker(e, 1, 1024);
  usleep(20 * 1000);  // both asleep on their task rings
  Reap(e, {p0, p1});  // exits 0 only if Next() returned Closed
}

}  // namespace
}  // namespace stoker
