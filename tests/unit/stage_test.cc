#include "core/stage.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace stoker {
namespace {

uint64_t Ms(uint64_t ns) { return ns / 1'000'000; }
void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(Stage, OnlyTheInnermostStageCounts) {
  std::thread([] {  // (a thread of its own: a fresh clock)
    EnterStage(Stage::kRead);
    Sleep(20);
    {
      StageScope decode(Stage::kDecode);
      Sleep(30);
    }
    Sleep(10);
    LeaveStage();
    Sleep(20);  // in no stage: not counted
    const StageTimes t = ThreadStageTimes();
    EXPECT_GE(Ms(t.ns[static_cast<int>(Stage::kRead)]), 29u);
    EXPECT_LT(Ms(t.ns[static_cast<int>(Stage::kRead)]), 45u);
    EXPECT_GE(Ms(t.ns[static_cast<int>(Stage::kDecode)]), 29u);
    EXPECT_LT(Ms(t.ns[static_cast<int>(Stage::kDecode)]), 45u);
    EXPECT_EQ(t.ns[static_cast<int>(Stage::kCollate)], 0u);
  }).join();
}

TEST(Stage, TheStageAThreadIsInCountsUpToNowAndLeaveAllEndsEveryStage) {
  std::thread([] {
    EnterStage(Stage::kCollate);
    EnterStage(Stage::kWaitMemory);
    Sleep(20);
    EXPECT_GE(Ms(ThreadStageTimes().ns[static_cast<int>(Stage::kWaitMemory)]), 19u);
    LeaveAllStages();
    const uint64_t before = ThreadStageTimes().ns[static_cast<int>(Stage::kWaitMemory)];
    Sleep(10);
    EXPECT_EQ(ThreadStageTimes().ns[static_cast<int>(Stage::kWaitMemory)], before);
    LeaveStage();  // (nothing to leave: harmless)
  }).join();
}

TEST(Stage, ClocksArePerThread) {
  std::thread a([] {
    StageScope s(Stage::kFetch);
    Sleep(20);
  });
  a.join();
  std::thread([] { EXPECT_EQ(ThreadStageTimes().ns[static_cast<int>(Stage::kFetch)], 0u); }).join();
}

TEST(Stage, NamesAreTheTracesVocabulary) {
  EXPECT_STREQ(StageName(Stage::kRead), "read");
  EXPECT_STREQ(StageName(Stage::kWaitStore), "wait");
  EXPECT_STREQ(StageDetail(Stage::kWaitStore), "store");
  EXPECT_STREQ(StageDetail(Stage::kWaitBatch), "batch");
  EXPECT_STREQ(StageDetail(Stage::kDecode), "");
  EXPECT_STREQ(StageName(Stage::kH2D), "h2d");
}

}  // namespace
}  // namespace stoker
