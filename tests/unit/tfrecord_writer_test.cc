// io/tfrecord_writer: tf.train.Example records, written whole or not at all.
#include "io/tfrecord_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "example.pb.h"
#include "io/file_reader.h"
#include "io/tfrecord_file.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::TempPath;

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

TEST(TFRecordWriter, WritesExamplesThatProtobufReadsBack) {
  const std::string path = TempPath("w.tfrecord");
  auto w = TFRecordWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const float xs[3] = {1.5f, 2.5f, -1.f};
  const int64_t y = 42;
  FeatureValue fx, fy, fb;
  fx.name = "x", fx.kind = FeatureValue::Kind::kFloat, fx.floats = xs, fx.count = 3;
  fy.name = "y", fy.kind = FeatureValue::Kind::kInt64, fy.ints = &y, fy.count = 1;
  fb.name = "b", fb.kind = FeatureValue::Kind::kBytes, fb.bytes = {"hello", ""}, fb.count = 2;
  ASSERT_TRUE(w.value()->Write({fx, fy, fb}).ok());
  Status twice = w.value()->Write({fx, fx});
  EXPECT_EQ(twice.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("'x'"), std::string::npos) << twice.ToString();
  EXPECT_FALSE(Exists(path));  // not before Close
  ASSERT_TRUE(w.value()->Close().ok());
  EXPECT_EQ(w.value()->records(), 1u);
  EXPECT_FALSE(w.value()->Write({fy}).ok());  // closed

  FileReader f = FileReader::Open(path).value();
  TFRecordIndexOptions o;
  o.cache = false;
  auto idx = LoadOrBuildTFRecordIndex(f, o);
  ASSERT_TRUE(idx.ok() && idx.value().records.size() == 1u);
  std::vector<uint8_t> buf;
  uint32_t crc = 0;
  auto data = ReadTFRecord(f, idx.value().records[0], 0, true, &buf, &crc);
  ASSERT_TRUE(data.ok());
  tf::Example ex;
  ASSERT_TRUE(ex.ParseFromArray(data.value(), static_cast<int>(idx.value().records[0].length)));
  const auto& m = ex.features().feature();
  ASSERT_EQ(m.at("x").float_list().value_size(), 3);
  EXPECT_EQ(m.at("x").float_list().value(1), 2.5f);
  EXPECT_EQ(m.at("y").int64_list().value(0), 42);
  EXPECT_EQ(m.at("b").bytes_list().value(0), "hello");
  std::remove(path.c_str());
}

TEST(TFRecordWriter, WithoutCloseNothingAppears) {
  const std::string path = TempPath("never.tfrecord");
  {
    auto w = TFRecordWriter::Create(path);
    ASSERT_TRUE(w.ok());
    const int64_t y = 1;
    FeatureValue fy;
    fy.name = "y", fy.kind = FeatureValue::Kind::kInt64, fy.ints = &y, fy.count = 1;
    ASSERT_TRUE(w.value()->Write({fy}).ok());
  }
  EXPECT_FALSE(Exists(path));
}

}  // namespace
}  // namespace stoker
