// loader/slot_pool: the slot state machine, the free stack, regions within
// the budget, the batch size learnt, when the training loop holds too much,
// and CUDA fences (against the fake runtime).
#include "loader/slot_pool.h"

#include <gtest/gtest.h>

#include <memory>

#include "fake_cuda.h"

namespace stoker {
namespace {

using testing::FakeCuda;

struct Pool {
  explicit Pool(uint64_t max_memory, uint32_t slots = 4)
      : arena(Arena::Create({1, slots, 2 * max_memory, max_memory}).value()), pool(arena.get(), slots, max_memory) {}
  std::shared_ptr<Arena> arena;
  SlotPool pool;
};

// FREE -> FILLING -> READY -> HELD: a slot as the training loop gets it.
uint32_t Held(SlotPool& s, uint64_t bytes) {
  uint32_t slot = 0;
  EXPECT_TRUE(s.Acquire(bytes, bytes, false, SlotState::kFilling, &slot).value());
  s.Complete(slot, bytes, true);
  EXPECT_TRUE(s.Hold(slot));
  return slot;
}

TEST(SlotPool, TheStateMachine) {
  Pool p(4 << 20);
  SlotPool& s = p.pool;
  uint32_t a = 9, b = 9;
  ASSERT_TRUE(s.Acquire(100 << 10, 100 << 10, true, SlotState::kDispatched, &a).value());
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(s[a].state, SlotState::kDispatched);
  EXPECT_FALSE(s.Hold(a)) << "only a READY slot can be held";
  s.Release(a);
  EXPECT_EQ(s[a].state, SlotState::kDispatched) << "a release of a slot in flight does nothing";
  s.Complete(a, 100 << 10, true);
  EXPECT_EQ(s[a].state, SlotState::kReady);
  EXPECT_EQ(s.expected(), 100u << 10);
  EXPECT_TRUE(s.Hold(a));
  EXPECT_FALSE(s.Hold(a));
  s.Release(a);
  EXPECT_EQ(s[a].state, SlotState::kFree);
  EXPECT_EQ(p.arena->slot(a)->state.load(), static_cast<uint32_t>(SlotState::kFree)) << "FREE is stored shared";
  s.Release(a);  // a second release changes nothing
  EXPECT_EQ(s.free_count(), 4u);
  // A worker that dies: the slots dispatched to it are free again, others are not.
  ASSERT_TRUE(s.Acquire(1, 1, true, SlotState::kDispatched, &a).value());
  ASSERT_TRUE(s.Acquire(1, 1, true, SlotState::kDispatched, &b).value());
  s.ReclaimFrom(1, [&](uint32_t slot) { return slot == b ? 1u : 0u; });
  EXPECT_EQ(s[b].state, SlotState::kFree);
  EXPECT_EQ(s[a].state, SlotState::kDispatched);
  EXPECT_EQ(s.free_count(), 3u);
}

TEST(SlotPool, FreeSlotsComeWarmestFirst) {
  Pool p(4 << 20);
  SlotPool& s = p.pool;
  ASSERT_EQ(s.free_count(), 4u);
  const uint32_t a = Held(s, 4096), b = Held(s, 4096);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  s.Release(a);  // back on top: its region is the warm one
  EXPECT_EQ(Held(s, 4096), a);
  EXPECT_EQ(s.free_count(), 2u);
}

TEST(SlotPool, RegionsStayWithinTheBudgetAndComeBackFromIdleSlots) {
  Pool p(1 << 20);  // about 1 MiB for regions, less the control area
  SlotPool& s = p.pool;
  const uint64_t half = s.budget() / 2 / 4096 * 4096, part = s.budget() * 3 / 8 / 4096 * 4096;
  const uint32_t a = Held(s, part), b = Held(s, part);
  EXPECT_GE(s[a].capacity, part);
  EXPECT_EQ(s[a].capacity % 4096, 0u);
  EXPECT_LE(s.in_use_bytes(), s.budget());
  // No room for a third while both are held: not now (false), not an error.
  uint32_t c = 0;
  Result<bool> third = s.Acquire(half, half, false, SlotState::kFilling, &c);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third.value());
  // ... though a smaller one, the least asked for, fits.
  ASSERT_TRUE(s.Acquire(half, 64 << 10, false, SlotState::kFilling, &c).value());
  EXPECT_LT(s[c].capacity, half);
  s.Complete(c, 1, false);
  s.Release(c);
  // Slot b goes idle: its region is taken back for the next batch.
  s.Release(b);
  ASSERT_TRUE(s.SizeRegion(2, half, false).value());
  EXPECT_LE(s.resident_bytes(), s.budget());
  // More than the whole budget is an error naming max_memory.
  Result<bool> huge = s.Acquire(s.budget() + 1, s.budget() + 1, false, SlotState::kFilling, &c);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("max_memory=1048576"), std::string::npos) << huge.status().ToString();
}

// TrimIdle: idle free regions give their pages back, coldest first, the
// regions of slots in use counting first; the pool goes on as before.
TEST(SlotPool, TrimIdleGivesBackIdleRegionsColdestFirst) {
  Pool p(4 << 20);
  SlotPool& s = p.pool;
  const uint64_t part = 256 << 10;
  uint32_t slots[4];
  for (uint32_t& x : slots) x = Held(s, part);
  s.Release(slots[0]), s.Release(slots[1]), s.Release(slots[2]);  // slots[2]: the warmest free
  const uint64_t before = s.resident_bytes();
  EXPECT_GE(before, 4 * part);
  // 2 regions stay: slots[3]'s (held) and the warmest free one's.
  EXPECT_GE(s.TrimIdle(2), 2 * part);
  EXPECT_EQ(s[slots[3]].capacity, part);
  EXPECT_EQ(s[slots[2]].capacity, part);
  EXPECT_EQ(s[slots[0]].capacity, 0u);
  EXPECT_EQ(s[slots[1]].capacity, 0u);
  EXPECT_LE(s.resident_bytes(), before - 2 * part);
  EXPECT_EQ(s.TrimIdle(2), 0u) << "nothing more to give back";
  EXPECT_EQ(s.TrimIdle(0), part) << "the free one's region; the held one keeps its own";
  EXPECT_EQ(s[slots[3]].capacity, part);
  // The pool goes on: regions are made again as batches come.
  for (uint32_t i = 0; i < 3; ++i) EXPECT_GE(s[Held(s, part)].capacity, part);
  EXPECT_EQ(s.free_count(), 0u);
}

TEST(SlotPool, LearnsTheBatchSizeAndAddsHeadroomOnceSizesVary) {
  Pool p(64 << 20);
  SlotPool& s = p.pool;
  EXPECT_EQ(s.RegionFor(100), 100u);  // nothing learnt: the payload
  s.Learn(1 << 20);
  EXPECT_EQ(s.expected(), 1u << 20);
  EXPECT_EQ(s.RegionFor(0), 1u << 20);  // one size so far: exactly it
  s.Learn(512 << 10);                   // smaller: nothing changes
  EXPECT_EQ(s.RegionFor(0), 1u << 20);
  s.Learn(2 << 20);  // sizes vary now: a quarter more
  EXPECT_EQ(s.RegionFor(0), (2u << 20) + (512u << 10));
  s.LearnAsked(3 << 20);
  EXPECT_EQ(s.expected(), 3u << 20);
  EXPECT_LE(s.RegionFor(s.budget()), s.budget());  // headroom never past the budget
}

TEST(SlotPool, CrowdedWhenTheTrainingLoopHoldsTooMuch) {
  Pool p(8 << 20, 8);
  SlotPool& s = p.pool;
  s.Learn(1 << 20);
  std::vector<uint32_t> held;
  for (uint32_t i = 0; i < 4; ++i) {
    uint32_t slot = 0;
    ASSERT_TRUE(s.Acquire(1 << 20, 1 << 20, false, SlotState::kFilling, &slot).value());
    s.Complete(slot, 1 << 20, true);
    EXPECT_FALSE(s.Crowded(slot, 2)) << "holding " << i << " batches";
    ASSERT_TRUE(s.Hold(slot));
    held.push_back(slot);
  }
  // Four of about eight MiB held; a fifth leaves less than one batch per worker.
  uint32_t fifth = 0;
  ASSERT_TRUE(s.Acquire(1 << 20, 1 << 20, false, SlotState::kFilling, &fifth).value());
  s.Complete(fifth, 1 << 20, true);
  EXPECT_TRUE(s.Crowded(fifth, 4));
  s.Release(held[0]);  // a held batch dropped: its bytes are no longer held
  s.Release(held[1]);
  EXPECT_FALSE(s.Crowded(fifth, 2));
}

TEST(SlotPool, AHeldSlotWaitsForItsFenceAReadyOneDoesNot) {
  FakeCuda::Reset();
  Pool p(4 << 20, 2);
  SlotPool& s = p.pool;
  CudaRuntimeApi missing = FakeCuda::Api();
  missing.event_query = nullptr;
  EXPECT_EQ(s.EnableCuda(missing).code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(s.cuda_on());
  ASSERT_TRUE(s.EnableCuda(FakeCuda::Api()).ok());
  int stream = 0;
  ASSERT_EQ(s.RecordFence(&stream), 0);  // fence 1
  const uint32_t a = Held(s, 4096);
  s.Release(a);
  EXPECT_TRUE(s[a].fenced);
  EXPECT_EQ(s[a].state, SlotState::kHeld);
  FakeCuda::FinishUpTo(1);  // the GPU is past fence 1, recorded before the drop
  const uint32_t b = Held(s, 4096);
  EXPECT_NE(b, a);
  uint32_t c = 0;
  EXPECT_FALSE(s.Acquire(4096, 4096, false, SlotState::kFilling, &c).value()) << "a is fenced, b held";
  ASSERT_EQ(s.RecordFence(&stream), 0);  // fence 2, after the drop
  FakeCuda::FinishUpTo(2);
  ASSERT_TRUE(s.Acquire(4096, 4096, false, SlotState::kFilling, &c).value());
  EXPECT_EQ(c, a);
  s.Complete(c, 4096, true);
  s.Release(c);  // READY, never held: no copy can read it
  EXPECT_EQ(s[c].state, SlotState::kFree);
  s.Release(b);
  EXPECT_TRUE(s.DrainFences());
  EXPECT_EQ(s.free_count(), 2u);
  EXPECT_FALSE(s.DrainFences()) << "nothing left to drain";
}

}  // namespace
}  // namespace stoker
