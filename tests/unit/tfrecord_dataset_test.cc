// io/tfrecord_dataset (with tfrecord_file and tfrecord_writer): reads, decodes, the cached index, bad CRCs, truncation.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "example.pb.h"
#include "io/tfrecord_dataset.h"
#include "io/tfrecord_file.h"
#include "io/tfrecord_writer.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::TempPath;
using testing::WriteFile;
using testing::ReadFile;

void RemoveWithIndex(const std::string& path) {
  std::remove(path.c_str());
  std::remove((path + ".stoker-index").c_str());
}

// A record of every kind of feature, as a TensorFlow program would write it.
std::string ExampleBytes(int i) {
  tf::Example ex;
  auto& m = *ex.mutable_features()->mutable_feature();
  for (int k = 0; k < 6; ++k) m["x"].mutable_float_list()->add_value(static_cast<float>(i * 10 + k));
  m["y"].mutable_int64_list()->add_value(i);
  int16_t raw[4] = {static_cast<int16_t>(i), -1, 2, 3};
  m["raw"].mutable_bytes_list()->add_value(std::string(reinterpret_cast<char*>(raw), 8));
  m["unused"].mutable_bytes_list()->add_value("ignored");
  std::string s;
  ex.SerializeToString(&s);
  return s;
}

std::vector<FieldSpec> Specs() {
  return {{"x", ElementType::kFloat32, {2, 3}}, {"y", ElementType::kInt64, {}}, {"raw", ElementType::kInt16, {4}}};
}

std::string WriteTFRecords(const std::string& path, int n) {
  std::string file;
  for (int i = 0; i < n; ++i) {
    const std::string e = ExampleBytes(i);
    AppendTFRecord(&file, e.data(), e.size());
  }
  WriteFile(path, file);
  return file;
}

struct Sample {
  float x[6];
  int64_t y;
  int16_t raw[4];
  uint8_t* dst[3] = {reinterpret_cast<uint8_t*>(x), reinterpret_cast<uint8_t*>(&y), reinterpret_cast<uint8_t*>(raw)};
};

TEST(TFRecordDataset, ReadsDecodesAndCachesTheIndex) {
  const std::string path = TempPath("ok.tfrecord");
  WriteTFRecords(path, 50);
  auto ds = TFRecordDataset::Open({path}, Specs());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), 50u);
  EXPECT_EQ(ds.value()->index_paths()[0], path + ".stoker-index");
  Sample s;
  for (uint64_t i : {0u, 17u, 49u}) {
    ASSERT_TRUE(ds.value()->Read(i, s.dst).ok());
    EXPECT_EQ(s.x[0], i * 10.0f);
    EXPECT_EQ(s.x[5], i * 10.0f + 5);
    EXPECT_EQ(s.y, static_cast<int64_t>(i));
    EXPECT_EQ(s.raw[0], static_cast<int16_t>(i));
    EXPECT_EQ(s.raw[1], -1);
  }
  // Second open: the index comes from the cache file.
  FileReader f = std::move(FileReader::Open(path)).value();
  auto idx = LoadOrBuildTFRecordIndex(f, {});
  ASSERT_TRUE(idx.ok());
  EXPECT_TRUE(idx.value().loaded_from_cache);
  EXPECT_EQ(idx.value().records.size(), 50u);
  // The file changes: the cached index is stale and rebuilt.
  WriteTFRecords(path, 7);
  FileReader g = std::move(FileReader::Open(path)).value();
  auto idx2 = LoadOrBuildTFRecordIndex(g, {});
  ASSERT_TRUE(idx2.ok());
  EXPECT_FALSE(idx2.value().loaded_from_cache);
  EXPECT_EQ(idx2.value().records.size(), 7u);
  // A corrupt index file is rebuilt, not trusted.
  std::string bytes = ReadFile(path + ".stoker-index");
  bytes[70] ^= 1;
  WriteFile(path + ".stoker-index", bytes);
  FileReader h = std::move(FileReader::Open(path)).value();
  auto idx3 = LoadOrBuildTFRecordIndex(h, {});
  ASSERT_TRUE(idx3.ok());
  EXPECT_FALSE(idx3.value().loaded_from_cache);
  RemoveWithIndex(path);
}

TEST(TFRecordDataset, IndexDirAndMmapAndOnePassWriter) {
  const std::string path = TempPath("w.tfrecord");
  const std::string dir = TempPath("idxdir");
  auto w = TFRecordWriter::Create(path);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 10; ++i) {
    float xs[6];
    for (int k = 0; k < 6; ++k) xs[k] = static_cast<float>(i * 10 + k);
    int64_t y = i;
    int16_t raw[4] = {static_cast<int16_t>(i), -1, 2, 3};
    FeatureValue fx{"x", FeatureValue::Kind::kFloat, xs, nullptr, {}, 6};
    FeatureValue fy{"y", FeatureValue::Kind::kInt64, nullptr, &y, {}, 1};
    FeatureValue fr{"raw", FeatureValue::Kind::kBytes, nullptr, nullptr,
                    {std::string_view(reinterpret_cast<char*>(raw), 8)}, 0};
    ASSERT_TRUE(w.value()->Write({fx, fy, fr}).ok());
  }
  ASSERT_TRUE(w.value()->Close().ok());
  // What the writer wrote parses as an Example with the generated class.
  FileReader f = std::move(FileReader::Open(path)).value();
  auto idx = LoadOrBuildTFRecordIndex(f, {dir, false});
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(idx.value().cache_path.rfind(dir, 0), 0u) << idx.value().cache_path;
  std::vector<uint8_t> buf;
  uint32_t stored = 0;
  auto rec = ReadTFRecord(f, idx.value().records[3], 3, true, &buf, &stored);
  ASSERT_TRUE(rec.ok());
  tf::Example ex;
  ASSERT_TRUE(ex.ParseFromArray(rec.value(), static_cast<int>(idx.value().records[3].length)));
  EXPECT_EQ(ex.features().feature().at("x").float_list().value(2), 32.0f);
  EXPECT_EQ(ex.features().feature().at("y").int64_list().value(0), 3);
  TFRecordOptions o;
  o.index_dir = dir;
  o.io = IoMode::kMmap;
  auto ds = TFRecordDataset::Open({path, path}, Specs(), o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds.value()->size(), 20u);
  Sample s;
  ASSERT_TRUE(ds.value()->Read(13, s.dst).ok());
  EXPECT_EQ(s.y, 3);
  EXPECT_EQ(s.x[1], 31.0f);
  std::remove(path.c_str());
  std::remove(idx.value().cache_path.c_str());
  rmdir(dir.c_str());
}

TEST(TFRecordDataset, BadCrcNamesFileRecordOffsetAndSkipCounts) {
  const std::string path = TempPath("crc.tfrecord");
  std::string file = WriteTFRecords(path, 5);
  const std::string r0 = ExampleBytes(0);
  const uint64_t rec1 = kTFRecordHeader + r0.size() + kTFRecordFooter;
  file[rec1 + kTFRecordHeader + 5] ^= 0x40;  // a data byte of record 1
  WriteFile(path, file);
  auto ds = TFRecordDataset::Open({path}, Specs());
  ASSERT_TRUE(ds.ok());
  Sample s;
  Status st = ds.value()->Read(1, s.dst);
  ASSERT_TRUE(st.IsDataLoss()) << st.ToString();
  EXPECT_NE(st.message().find(path + ", record 1 (byte offset " + std::to_string(rec1) + ")"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("data's CRC does not match"), std::string::npos);
  EXPECT_TRUE(ds.value()->Read(2, s.dst).ok());
  // Without verification the flipped byte goes through undetected.
  TFRecordOptions o;
  o.verify_crc = false;
  auto nv = TFRecordDataset::Open({path}, Specs(), o);
  ASSERT_TRUE(nv.ok());
  EXPECT_EQ(nv.value()->Read(1, s.dst).message().find("CRC"), std::string::npos);
  RemoveWithIndex(path);
}

TEST(TFRecordDataset, TruncatedFileRaisesOrSkipsTheTail) {
  const std::string path = TempPath("trunc.tfrecord");
  std::string file = WriteTFRecords(path, 4);
  WriteFile(path, file.substr(0, file.size() - 10));
  auto ds = TFRecordDataset::Open({path}, Specs());
  ASSERT_FALSE(ds.ok());
  EXPECT_TRUE(ds.status().IsDataLoss());
  EXPECT_NE(ds.status().message().find(path + ", record 3"), std::string::npos) << ds.status().message();
  EXPECT_NE(ds.status().message().find("truncated"), std::string::npos);
  TFRecordOptions o;
  o.on_error = OnError::kSkip;
  auto skip = TFRecordDataset::Open({path}, Specs(), o);
  ASSERT_TRUE(skip.ok()) << skip.status().ToString();
  EXPECT_EQ(skip.value()->size(), 3u);
  EXPECT_EQ(skip.value()->skipped(), 1u);
  EXPECT_NE(skip.value()->last_skipped().find("record 3"), std::string::npos);
  // The saved index remembers the bad tail; raising mode still raises.
  auto again = TFRecordDataset::Open({path}, Specs());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("record 3"), std::string::npos);
  // Not a TFRecord file at all.
  WriteFile(path, std::string(100, 'a'));
  auto junk = TFRecordDataset::Open({path}, Specs());
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("record 0 (byte offset 0)"), std::string::npos) << junk.status().message();
  RemoveWithIndex(path);
  auto missing = TFRecordDataset::Open({path + ".nope"}, Specs());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path + ".nope"), std::string::npos);
}

}  // namespace
}  // namespace stoker
