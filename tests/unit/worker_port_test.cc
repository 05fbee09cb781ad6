// loader/worker_port: the worker's side of the rings, with the Engine as
// the main process (a thread stands in for the worker process).
#include "loader/worker_port.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "loader/engine.h"
#include "watchdog.h"

namespace stoker {
namespace {

std::shared_ptr<Engine> MakeEngine(uint64_t max_memory = 16 << 20) {
  auto e = Engine::Create(EngineOptions{1, max_memory, 8, /*process_shared=*/false});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.value();
}

uint32_t Dispatch(Engine& e, uint64_t batch_id, const std::vector<int64_t>& indices) {
  uint32_t slot = 0;
  auto r = e.Dispatch(0, batch_id, 0, TaskKind::kIndices, indices.data(), indices.size() * 8, &slot);
  EXPECT_TRUE(r.ok() && r.value()) << r.status().ToString();
  return slot;
}

TEST(WorkerPort, TakesATaskWritesTheBatchAndPublishesIt) {
  testing::Watchdog dog(std::chrono::seconds(30), "WorkerPort.TakesATask");
  auto e = MakeEngine();
  WorkerPort port(std::shared_ptr<Arena>(e, &e->arena()), 0);
  const uint32_t slot = Dispatch(*e, 7, {3, 1, 4});
  Task t;
  ASSERT_TRUE(port.Next(&t, 1'000'000'000).ok());
  EXPECT_EQ(t.msg, TaskMsg::kFill);
  EXPECT_EQ(t.slot, slot);
  EXPECT_EQ(t.batch_id, 7u);
  EXPECT_EQ(t.kind, TaskKind::kIndices);
  ASSERT_EQ(t.payload_bytes, 24u);
  int64_t idx[3];
  std::memcpy(idx, t.payload, 24);
  EXPECT_EQ(idx[2], 4);
  auto region = port.Reserve(slot, 1000);
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  std::memset(region.value(), 0xab, 1000);
  port.Publish(slot, SlotResult::kOk, 1000);
  std::vector<Completion> done;
  ASSERT_TRUE(e->Wait(1'000'000'000, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].batch_id, 7u);
  EXPECT_EQ(done[0].result, SlotResult::kOk);
  uint64_t used = 0, cap = 0;
  const uint8_t* p = e->SlotRegion(slot, &used, &cap);
  EXPECT_EQ(used, 1000u);
  EXPECT_EQ(p[999], 0xab);
  e->Release(slot);
}

TEST(WorkerPort, AResumeCarriesTheGenerationAndTheSharedSeedOfTheNextIteration) {
  testing::Watchdog dog(std::chrono::seconds(30), "WorkerPort.Resume");
  auto e = MakeEngine();
  WorkerPort port(std::shared_ptr<Arena>(e, &e->arena()), 0);
  EXPECT_EQ(port.epoch(), -1);
  e->SetEpoch(3);
  e->SetSharedSeed(0xfeedfacecafebeefull);
  ASSERT_TRUE(e->SendResume(0, 5).ok());
  Task t;
  ASSERT_TRUE(port.Next(&t, 1'000'000'000).ok());
  EXPECT_EQ(t.msg, TaskMsg::kResume);
  EXPECT_EQ(t.generation, 5u);
  EXPECT_EQ(port.shared_seed(), 0xfeedfacecafebeefull);
  EXPECT_EQ(port.epoch(), 3);
}

TEST(WorkerPort, ABiggerBatchAsksTheMainProcessForRoom) {
  testing::Watchdog dog(std::chrono::seconds(30), "WorkerPort.Bigger");
  auto e = MakeEngine();
  WorkerPort port(std::shared_ptr<Arena>(e, &e->arena()), 0);
  const uint32_t slot = Dispatch(*e, 0, {0});
  Status worker_status;
  std::thread worker([&] {
    Task t;
    worker_status = port.Next(&t, 1'000'000'000);
    if (!worker_status.ok()) return;
    auto big = port.Reserve(t.slot, 4 << 20);  // more than a first region: the engine answers
    if (!big.ok()) {
      worker_status = big.status();
      return;
    }
    std::memset(big.value(), 1, 4 << 20);
    port.Publish(t.slot, SlotResult::kOk, 4 << 20);
  });
  std::vector<Completion> done;
  while (done.empty()) ASSERT_TRUE(e->Wait(-1, &done).ok());  // answers the request on the way
  worker.join();
  ASSERT_TRUE(worker_status.ok()) << worker_status.ToString();
  uint64_t used = 0, cap = 0;
  e->SlotRegion(slot, &used, &cap);
  EXPECT_EQ(used, 4u << 20);
  EXPECT_GE(cap, 4u << 20);
  EXPECT_EQ(e->Stats().need_space_events, 1u);
  e->Release(slot);
}

TEST(WorkerPort, MoreThanTheBudgetIsResourceExhaustedAndShutdownIsClosed) {
  testing::Watchdog dog(std::chrono::seconds(30), "WorkerPort.Budget");
  auto e = MakeEngine(2 << 20);
  WorkerPort port(std::shared_ptr<Arena>(e, &e->arena()), 0);
  const uint32_t slot = Dispatch(*e, 0, {0});
  Result<uint8_t*> huge = Status::OK();
  std::thread worker([&] {
    Task t;
    if (!port.Next(&t, 1'000'000'000).ok()) return;
    huge = port.Reserve(t.slot, 64 << 20);
    uint64_t cap = 0;
    port.Region(t.slot, &cap);  // still usable for an error report
    port.Publish(t.slot, SlotResult::kError, std::min<uint64_t>(cap, 16));
  });
  std::vector<Completion> done;
  while (done.empty()) ASSERT_TRUE(e->Wait(-1, &done).ok());
  worker.join();
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("max_memory"), std::string::npos) << huge.status().ToString();
  EXPECT_EQ(done[0].result, SlotResult::kError);
  e->Release(slot);
  e->Shutdown();
  Task t;
  EXPECT_TRUE(port.Next(&t, 1'000'000'000).IsClosed());
}

}  // namespace
}  // namespace stoker
