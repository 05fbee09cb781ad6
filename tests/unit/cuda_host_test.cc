// Pinning and fences (loader/cuda_host.h) against a fake CUDA runtime: what
// is registered and unregistered, the fence order, and the engine keeping a
// dropped batch's slot out of use until the GPU is past it.
#include "loader/cuda_host.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>

#include "fake_cuda.h"
#include "loader/engine.h"

namespace stoker {
namespace {

using testing::FakeCuda;

TEST(CudaHost, RegistersRangesOnceAndUnregistersThemAllAtTheEnd) {
  FakeCuda::Reset();
  alignas(4096) static uint8_t mem[3 * 4096];
  {
    CudaHost h(FakeCuda::Api());
    EXPECT_EQ(h.Register(mem, 4096), 0);
    EXPECT_EQ(h.Register(mem, 4096), 0);  // already registered: nothing new
    EXPECT_EQ(h.Register(mem + 4096, 2 * 4096), 0);
    ASSERT_EQ(FakeCuda::Get().registered.size(), 2u);
    EXPECT_EQ(FakeCuda::Get().registered[1], std::make_pair(static_cast<void*>(mem + 4096), size_t{2 * 4096}));
    h.Unregister(mem + 4096);
    h.Unregister(mem + 8);  // never registered: nothing
    ASSERT_EQ(FakeCuda::Get().unregistered.size(), 1u);
    EXPECT_EQ(h.registered(), 1u);
  }
  ASSERT_EQ(FakeCuda::Get().unregistered.size(), 2u) << "what is left is unregistered at the end";
  EXPECT_EQ(FakeCuda::Get().unregistered[1], mem);
}

TEST(CudaHost, AFailedRegistrationIsKeptAndNothingMoreIsRegistered) {
  FakeCuda::Reset();
  alignas(4096) static uint8_t mem[2 * 4096];
  CudaHost h(FakeCuda::Api());
  FakeCuda::Get().register_error = 2;  // cudaErrorMemoryAllocation
  EXPECT_EQ(h.Register(mem, 4096), 2);
  EXPECT_EQ(h.pin_error(), 2);
  EXPECT_EQ(FakeCuda::Get().last_error, 0) << "the failure is not left for torch's next launch to report";
  FakeCuda::Get().register_error = 0;
  EXPECT_EQ(h.Register(mem + 4096, 4096), 2);
  EXPECT_TRUE(FakeCuda::Get().registered.empty());
}

TEST(CudaHost, FencesCompleteInOrderAndEventsAreReused) {
  FakeCuda::Reset();
  {
    CudaHost h(FakeCuda::Api());
    int stream = 0;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(h.Record(&stream), 0);
    EXPECT_EQ(h.recorded(), 3u);
    EXPECT_EQ(h.Completed(), 0u);
    EXPECT_EQ(FakeCuda::Get().last_error, 0) << "'not ready' is cleared as the last error";
    EXPECT_GE(FakeCuda::Get().cleared, 1);
    FakeCuda::FinishUpTo(2);
    EXPECT_EQ(h.Completed(), 2u);
    FakeCuda::FinishUpTo(3);
    EXPECT_EQ(h.Completed(), 3u);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(h.Record(&stream), 0);
    EXPECT_EQ(FakeCuda::Get().events.size(), 3u) << "completed events are recorded again";
    EXPECT_EQ(h.Drain(), 7u) << "drain records one more and waits for all";
    EXPECT_EQ(h.Record(&stream), 0);
  }
  EXPECT_EQ(FakeCuda::Live(), 0u) << "every event destroyed";
  EXPECT_GE(FakeCuda::Get().synchronizes, 1) << "pending fences waited for before the memory goes";
}

TEST(CudaHost, AFenceThatFailsCountsAsDoneAndAFailedRecordIsReported) {
  FakeCuda::Reset();
  CudaHost h(FakeCuda::Api());
  int stream = 0;
  ASSERT_EQ(h.Record(&stream), 0);
  FakeCuda::Get().query_error = 700;  // cudaErrorIllegalAddress: the copy will never run
  EXPECT_EQ(h.Completed(), 1u);
  FakeCuda::Get().query_error = 0;
  FakeCuda::Get().record_error = 400;  // cudaErrorInvalidResourceHandle
  EXPECT_EQ(h.Record(&stream), 400);
  EXPECT_EQ(FakeCuda::Get().last_error, 0);
  EXPECT_EQ(h.recorded(), 1u);
  EXPECT_EQ(h.Drain(), 2u) << "no fence can be recorded: everything so far counts as done";
}

// A batch built in the pool (num_workers=0 path): READY, then HELD.
uint32_t HoldBatch(Engine& e, uint8_t fill) {
  uint32_t slot = 0;
  auto got = e.AcquireLocal(100 << 10, &slot);
  EXPECT_TRUE(got.ok() && got.value());
  uint64_t cap = 0;
  std::memset(e.LocalRegion(slot, &cap), fill, 100 << 10);
  e.CompleteLocal(slot, 100 << 10);
  e.MarkHeld(slot);
  return slot;
}

TEST(EngineFences, ADroppedBatchsSlotIsReusedOnlyOnceAFenceAfterTheDropCompleted) {
  FakeCuda::Reset();
  auto e = Engine::Create(EngineOptions{0, 16 << 20, 4, false}).value();
  ASSERT_TRUE(e->EnableCuda(FakeCuda::Api()).ok());
  int stream = 0;
  ASSERT_EQ(e->RecordFence(&stream), 0);   // fence 1: before batch a is even made
  const uint32_t a = HoldBatch(*e, 1);
  e->Release(a);                           // the loop dropped it; a copy may be queued
  e->Release(a);                           // a second release changes nothing
  EXPECT_EQ(e->Stats().slots_fenced, 1u);
  FakeCuda::FinishUpTo(1);                 // the GPU is past fence 1 only
  for (int i = 0; i < 3; ++i) EXPECT_NE(HoldBatch(*e, 2), a) << "slot of a reused before its fence";
  uint32_t slot = 0;
  auto got = e->AcquireLocal(100 << 10, &slot);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got.value()) << "every other slot is held, a is fenced: no room";
  ASSERT_EQ(e->RecordFence(&stream), 0);   // fence 2: the next batch asked for
  EXPECT_EQ(e->Stats().slots_fenced, 1u);
  FakeCuda::FinishUpTo(2);
  got = e->AcquireLocal(100 << 10, &slot);
  ASSERT_TRUE(got.ok() && got.value());
  EXPECT_EQ(slot, a);
  EXPECT_EQ(e->Stats().slots_fenced, 0u);
}

TEST(EngineFences, DrainWaitsForTheGpuAndFreesEveryFencedSlot) {
  FakeCuda::Reset();
  auto e = Engine::Create(EngineOptions{0, 16 << 20, 4, false}).value();
  ASSERT_TRUE(e->EnableCuda(FakeCuda::Api()).ok());
  int stream = 0;
  ASSERT_EQ(e->RecordFence(&stream), 0);
  for (int i = 0; i < 4; ++i) e->Release(HoldBatch(*e, 3));
  EXPECT_EQ(e->Stats().slots_fenced, 4u);
  EXPECT_TRUE(e->DrainFences());
  EXPECT_EQ(e->Stats().slots_fenced, 0u);
  EXPECT_EQ(e->Stats().slots_free, 4u);
  EXPECT_FALSE(e->DrainFences()) << "nothing left to drain";
}

TEST(EngineFences, ABatchNeverHandedOutIsFreedAtOnceAndNoFencesWithoutCuda) {
  FakeCuda::Reset();
  auto e = Engine::Create(EngineOptions{0, 16 << 20, 4, false}).value();
  const uint32_t plain = HoldBatch(*e, 4);
  e->Release(plain);
  EXPECT_EQ(e->Stats().slots_free, 4u) << "without EnableCuda a release frees at once";
  ASSERT_TRUE(e->EnableCuda(FakeCuda::Api()).ok());
  uint32_t slot = 0;
  ASSERT_TRUE(e->AcquireLocal(100 << 10, &slot).value());
  e->CompleteLocal(slot, 100 << 10);
  e->Release(slot);  // READY, never held by the loop: no copy can read it
  EXPECT_EQ(e->Stats().slots_free, 4u);
  EXPECT_TRUE(FakeCuda::Get().events.empty());
}

// Every registration is exactly a live slot region: the allocator never
// gets back (and never discards) a range CUDA still has pinned.
void ExpectRegistrationsAreRegions(Engine& e) {
  std::map<void*, size_t> regions;
  for (uint32_t i = 0; i < 4; ++i) {
    uint64_t cap = 0;
    uint8_t* r = e.LocalRegion(i, &cap);
    if (cap) regions[r] = cap;
  }
  EXPECT_EQ(FakeCuda::Get().live, regions);
}

TEST(EngineFences, RegionsAreRegisteredWhileTheyBelongToASlotAndUnregisteredBeforeTheyGoBack) {
  FakeCuda::Reset();
  {
    auto e = Engine::Create(EngineOptions{0, 2 << 20, 4, false}).value();
    const uint32_t before = HoldBatch(*e, 5);  // made before CUDA is enabled
    ASSERT_TRUE(e->EnableCuda(FakeCuda::Api()).ok());
    EXPECT_EQ(FakeCuda::Get().registered.size(), 1u) << "regions made before are registered at enable";
    int stream = 0;
    e->Release(before);
    ASSERT_EQ(e->RecordFence(&stream), 0);
    FakeCuda::FinishUpTo(1);
    ASSERT_EQ(e->RecordFence(&stream), 0);
    FakeCuda::FinishUpTo(2);
    ASSERT_EQ(e->RecordFence(&stream), 0);
    // Batches that outgrow the regions in a 2 MiB budget: regions are taken
    // back from idle slots and warm free space is discarded to fit.
    for (uint64_t bytes : {100u << 10, 300u << 10, 700u << 10, 1500u << 10, 200u << 10, 1800u << 10}) {
      uint32_t slot = 0;
      auto got = e->AcquireLocal(bytes, &slot);
      ASSERT_TRUE(got.ok() && got.value()) << bytes;
      e->CompleteLocal(slot, bytes);
      e->MarkHeld(slot);
      ExpectRegistrationsAreRegions(*e);
      e->Release(slot);
      FakeCuda::FinishUpTo(FakeCuda::Get().records);
      ASSERT_EQ(e->RecordFence(&stream), 0);
      FakeCuda::FinishUpTo(FakeCuda::Get().records);
      ASSERT_EQ(e->RecordFence(&stream), 0);
      ExpectRegistrationsAreRegions(*e);
    }
    EXPECT_GE(FakeCuda::Get().unregistered.size(), 1u) << "regions were given back along the way";
  }
  EXPECT_TRUE(FakeCuda::Get().live.empty()) << "the engine unregisters every region before the pool goes";
}

TEST(EngineFences, AMissingEntryPointIsRefused) {
  FakeCuda::Reset();
  auto e = Engine::Create(EngineOptions{0, 16 << 20, 4, false}).value();
  CudaRuntimeApi api = FakeCuda::Api();
  api.event_query = nullptr;
  EXPECT_EQ(e->EnableCuda(api).code(), Status::Code::kInvalidArgument);
  e->Release(HoldBatch(*e, 6));
  EXPECT_EQ(e->Stats().slots_free, 4u) << "refused: no fences, a release frees at once";
  EXPECT_TRUE(FakeCuda::Get().registered.empty()) << "refused: nothing registered";
}

}  // namespace
}  // namespace stoker
