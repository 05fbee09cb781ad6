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

}  // namespace
}  // namespace stoker
