// The native read path: raw and .npy record files, the batch layout, and
// NativeWorkers threads filling slots through the Scheduler.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "io/record_file_dataset.h"
#include "collate/native_collate.h"
#include "loader/native_workers.h"
#include "loader/scheduler.h"
#include "range_source.h"
#include "watchdog.h"

namespace stoker {
namespace {

std::string TempFile(const std::string& name, const std::string& bytes) {
  std::string path = ::testing::TempDir() + name + std::to_string(getpid());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string Floats(int n) {
  std::string s(n * 4, '\0');
  for (int i = 0; i < n; ++i) {
    float f = static_cast<float>(i);
    std::memcpy(&s[4 * i], &f, 4);
  }
  return s;
}

TEST(RecordFileDataset, RawRecordsAndErrors) {
  const std::string path = TempFile("raw", Floats(24));
  auto ds = RecordFileDataset::OpenRaw(path, ElementType::kFloat32, {2, 3});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), 4u);
  float out[6];
  uint8_t* dst[1] = {reinterpret_cast<uint8_t*>(out)};
  ASSERT_TRUE(ds.value()->Read(2, dst).ok());
  EXPECT_EQ(out[0], 12.0f);
  EXPECT_EQ(out[5], 17.0f);
  Status oob = ds.value()->Read(4, dst);
  EXPECT_FALSE(oob.ok());
  EXPECT_NE(oob.message().find("index 4 is out of range"), std::string::npos) << oob.message();
  auto bad = RecordFileDataset::OpenRaw(path, ElementType::kFloat32, {5});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a whole number of 20-byte records"), std::string::npos);
  truncate(path.c_str(), 40);  // shrinks under an open dataset
  Status cut = ds.value()->Read(3, dst);
  EXPECT_NE(cut.message().find("ends at byte 40"), std::string::npos) << cut.message();
  EXPECT_NE(cut.message().find(path), std::string::npos);
  std::remove(path.c_str());
}

TEST(RecordFileDataset, NpyHeaders) {
  std::string header = "{'descr': '<i2', 'fortran_order': False, 'shape': (3, 2), }";
  header.resize(118 - 10, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  for (int16_t v : {1, 2, 3, 4, 5, 6}) file.append(reinterpret_cast<const char*>(&v), 2);
  const std::string path = TempFile("npy", file);
  auto ds = RecordFileDataset::OpenNpy(path);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), 3u);
  ASSERT_EQ(ds.value()->fields()[0].shape, std::vector<int64_t>{2});
  int16_t out[2];
  uint8_t* dst[1] = {reinterpret_cast<uint8_t*>(out)};
  ASSERT_TRUE(ds.value()->Read(2, dst).ok());
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 6);
  std::remove(path.c_str());
  const std::string be_header = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }";
  const std::string big_endian =
      TempFile("npybe", std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(be_header.size()) + '\0' +
                            be_header + std::string(4, '\0'));
  auto be = RecordFileDataset::OpenNpy(big_endian);
  ASSERT_FALSE(be.ok());
  EXPECT_NE(be.status().message().find("'>f4' is not supported"), std::string::npos) << be.status().message();
  std::remove(big_endian.c_str());
}

TEST(NativeCollate, TensorAndDictLayouts) {
  NativeCollate one({FieldSpec{"", ElementType::kFloat32, {3}}}, 4);
  EXPECT_EQ(one.total_bytes() % kLeafAlign, 0u);
  std::vector<uint8_t> region(one.total_bytes());
  one.WriteHeader(region.data());
  BatchHeader h;
  std::memcpy(&h, region.data(), sizeof h);
  EXPECT_EQ(h.magic, kBatchMagic);
  EXPECT_EQ(region[sizeof h], static_cast<uint8_t>(Tag::kTensor));
  EXPECT_EQ(one.Sample(region.data(), 0, 1) - one.Sample(region.data(), 0, 0), 12);
  NativeCollate two({FieldSpec{"x", ElementType::kUInt8, {5}}, FieldSpec{"y", ElementType::kInt64, {}}}, 3);
  std::vector<uint8_t> r2(two.total_bytes());
  two.WriteHeader(r2.data());
  EXPECT_EQ(r2[sizeof(BatchHeader)], static_cast<uint8_t>(Tag::kDict));
  EXPECT_EQ((two.Sample(r2.data(), 1, 0) - r2.data()) % kLeafAlign, 0);
  EXPECT_GE(two.Sample(r2.data(), 1, 0), two.Sample(r2.data(), 0, 2) + 5);
}


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
