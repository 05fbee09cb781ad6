// Slot life cycle, space requests, worker death and the scheduler, with real
// forked worker processes.
#include "loader/engine.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "loader/scheduler.h"
#include "loader/worker_port.h"
#include "watchdog.h"

namespace stoker {
namespace {

using testing::Watchdog;

// Worker body: for each task, writes `bytes_for(batch)` bytes of the batch id
// (asking for space when needed) and publishes.  Optional delay per batch.
void RunWorker(std::shared_ptr<Arena> arena, uint32_t id, uint64_t bytes, useconds_t delay_even = 0) {
  WorkerPort port(arena, id);
  Task t;
  for (;;) {
    Status s = port.Next(&t, -1);
    if (s.IsClosed()) _exit(0);
    if (!s.ok()) _exit(2);
    if (t.msg != TaskMsg::kFill) continue;
    int64_t first_index = -1;
    if (t.payload_bytes >= 8) std::memcpy(&first_index, t.payload, 8);
    if (delay_even && t.batch_id % 2 == 0) usleep(delay_even);
    auto region = port.Reserve(t.slot, bytes);
    if (!region.ok()) _exit(3);
    std::memset(region.value(), static_cast<int>(first_index & 0xff), bytes);
    port.Publish(t.slot, SlotResult::kOk, bytes);
  }
}

std::shared_ptr<Engine> MakeEngine(uint32_t workers, uint64_t max_memory = 64 << 20) {
  auto e = Engine::Create(EngineOptions{workers, max_memory, 0, 64});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.value();
}

pid_t ForkWorker(const std::shared_ptr<Engine>& e, uint32_t id, uint64_t bytes, useconds_t delay = 0) {
  pid_t pid = fork();
  if (pid == 0) RunWorker(std::shared_ptr<Arena>(e, &e->arena()), id, bytes, delay);
  EXPECT_TRUE(e->Watch(id, pid).ok());
  return pid;
}

void Reap(const std::shared_ptr<Engine>& e, std::vector<pid_t> pids) {
  for (uint32_t w = 0; w < pids.size(); ++w) e->Forget(w);
  e->Shutdown();
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "worker exit status " << st;
  }
}

TEST(Engine, SlotLifeCycleWithSpaceRequest) {
  Watchdog dog(std::chrono::seconds(30), "SlotLifeCycleWithSpaceRequest");
  auto e = MakeEngine(1);
  const uint64_t kBytes = 300 * 1024;  // more than the first region (64 KiB)
  pid_t pid = ForkWorker(e, 0, kBytes);
  int64_t idx = 7;
  auto slot = e->Dispatch(0, 0, 1, TaskKind::kIndices, &idx, 8, false);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  std::vector<Completion> done;
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].slot, slot.value());
  EXPECT_EQ(done[0].batch_id, 0u);
  uint64_t used, cap;
  const uint8_t* p = e->SlotRegion(slot.value(), &used, &cap);
  EXPECT_EQ(used, kBytes);
  EXPECT_GE(cap, kBytes);
  EXPECT_EQ(p[0], 7);
  EXPECT_EQ(p[kBytes - 1], 7);
  EXPECT_TRUE(e->arena().Contains(p, used));
  EngineStats st = e->Stats();
  EXPECT_EQ(st.need_space_events, 1u);
  EXPECT_EQ(st.slots_ready, 1u);
  e->MarkHeld(slot.value());
  EXPECT_EQ(e->Stats().slots_held, 1u);
  e->Release(slot.value());
  st = e->Stats();
  EXPECT_EQ(st.slots_held, 0u);
  EXPECT_EQ(st.held_bytes, 0u);
  // The next batch reuses the warm, big-enough slot: no new space request.
  idx = 9;
  auto slot2 = e->Dispatch(0, 1, 1, TaskKind::kIndices, &idx, 8, false);
  ASSERT_TRUE(slot2.ok());
  EXPECT_EQ(slot2.value(), slot.value());
  done.clear();
  ASSERT_TRUE(e->Wait(10'000'000'000, &done).ok());
  EXPECT_EQ(e->Stats().need_space_events, 1u);
  e->Release(done[0].slot);
  Reap(e, {pid});
}

TEST(Engine, BudgetLimitsDispatch) {
  auto e = MakeEngine(1, 256 * 1024);  // room for four 64 KiB regions
  int64_t idx = 0;
  int ok = 0;
  for (int i = 0; i < 8; ++i)
    if (e->Dispatch(0, i, 1, TaskKind::kIndices, &idx, 8, false).ok()) ++ok;
  EXPECT_EQ(ok, 4);
  auto forced = e->Dispatch(0, 9, 1, TaskKind::kIndices, &idx, 8, true);
  EXPECT_TRUE(forced.ok()) << "over budget is allowed when asked for";
  EXPECT_EQ(e->Stats().over_budget_events, 1u);
  e->Shutdown();
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

class VectorSource : public IndexSource {
 public:
  explicit VectorSource(int n) : n_(n) {}
  Result<bool> Next(TaskSpec* spec) override {
    if (i_ >= n_) return false;
    int64_t v = i_++;
    spec->kind = TaskKind::kIndices;
    spec->payload.assign(reinterpret_cast<const char*>(&v), 8);
    spec->token = static_cast<uint64_t>(v) + 1;
    return true;
  }
  void Drop(uint64_t) override { ++dropped; }
  int dropped = 0;

 private:
  int n_, i_ = 0;
};

// Worker 0 is slow on even batches; in-order delivery must still be 0,1,2,...
TEST(Scheduler, InOrderDeliveryDespiteSlowWorker) {
  Watchdog dog(std::chrono::seconds(60), "InOrderDeliveryDespiteSlowWorker");
  auto e = MakeEngine(2);
  pid_t p0 = ForkWorker(e, 0, 4096, 2000), p1 = ForkWorker(e, 1, 4096, 2000);
  for (bool in_order : {true, false}) {
    Scheduler s(e, SchedulerOptions{2, 4, in_order, false});
    VectorSource src(200);
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

}  // namespace
}  // namespace stoker
