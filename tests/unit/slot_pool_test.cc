// loader/slot_pool: the free stack, regions within the budget, the batch
// size learnt, and when the training loop holds too much.
#include "loader/slot_pool.h"

#include <gtest/gtest.h>

#include <memory>

namespace stoker {
namespace {

struct Pool {
  explicit Pool(uint64_t max_memory, uint32_t slots = 4)
      : arena(Arena::Create({1, slots, 2 * max_memory, max_memory}).value()), pool(arena.get(), slots, max_memory) {}
  std::shared_ptr<Arena> arena;
  SlotPool pool;
};

TEST(SlotPool, FreeSlotsComeWarmestFirst) {
  Pool p(4 << 20);
  SlotPool& s = p.pool;
  ASSERT_EQ(s.free_count(), 4u);
  EXPECT_EQ(s.next_free(), 0u);
  s.TakeNextFree();
  EXPECT_EQ(s.next_free(), 1u);
  s.TakeNextFree();
  s[0].state = SlotState::kReady;
  s.PutFree(0);  // back on top: its region is the warm one
  EXPECT_EQ(s.next_free(), 0u);
  EXPECT_EQ(s[0].state, SlotState::kFree);
  EXPECT_EQ(s.free_count(), 3u);
}

TEST(SlotPool, RegionsStayWithinTheBudgetAndComeBackFromIdleSlots) {
  Pool p(1 << 20);  // about 1 MiB for regions, less the control area
  SlotPool& s = p.pool;
  const uint64_t half = s.budget() / 2 / 4096 * 4096;
  ASSERT_TRUE(s.SizeRegion(0, half, false).value());
  EXPECT_GE(s[0].capacity, half);
  EXPECT_EQ(s[0].capacity % 4096, 0u);
  ASSERT_TRUE(s.SizeRegion(1, half, false).value());
  EXPECT_LE(s.in_use_bytes(), s.budget());
  // No room for a third while slots 0 and 1 are busy: not now (false), not an error.
  s.TakeNextFree();
  s.TakeNextFree();
  Result<bool> third = s.SizeRegion(2, half, false);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third.value());
  // Slot 1 goes idle: its region is taken back for slot 2.
  s.PutFree(1);
  ASSERT_TRUE(s.SizeRegion(2, half, false).value());
  EXPECT_EQ(s[1].capacity, 0u);
  EXPECT_LE(s.resident_bytes(), s.budget());
  // More than the whole budget is an error naming max_memory.
  Result<bool> huge = s.SizeRegion(3, s.budget() + 1, false);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("max_memory=1048576"), std::string::npos) << huge.status().ToString();
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
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.SizeRegion(s.next_free(), 1 << 20, false).value());
    const uint32_t slot = s.next_free();
    s.TakeNextFree();
    s[slot].state = SlotState::kReady;
    EXPECT_FALSE(s.Crowded(slot, 2)) << "holding " << i << " batches";
    s.Hold(slot);
  }
  // Four of about eight MiB held; a fifth leaves less than one batch per worker.
  ASSERT_TRUE(s.SizeRegion(s.next_free(), 1 << 20, false).value());
  const uint32_t fifth = s.next_free();
  EXPECT_TRUE(s.Crowded(fifth, 4));
  s.PutFree(0);  // a held batch dropped: its bytes are no longer held
  s.PutFree(1);
  EXPECT_FALSE(s.Crowded(fifth, 2));
}

}  // namespace
}  // namespace stoker
