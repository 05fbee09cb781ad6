// io/tfrecord_file: record framing, the record index (built, saved beside
// the file, loaded while the file is unchanged), and damaged framing.
#include "io/tfrecord_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/crc32c.h"
#include "io/file_reader.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::TempPath;
using testing::WriteFile;

std::string Records(const std::vector<std::string>& datas) {
  std::string out;
  for (const std::string& d : datas) AppendTFRecord(&out, d.data(), d.size());
  return out;
}

TEST(TFRecordFile, FramingIsTensorFlowsAndReadsBack) {
  const std::string bytes = Records({"abc", ""});
  // length (u64), masked CRC of the length, data, masked CRC of the data.
  ASSERT_EQ(bytes.size(), (8 + 4 + 3 + 4) + (8 + 4 + 0 + 4));
  uint64_t len;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len, 3u);
  uint32_t len_crc, data_crc;
  std::memcpy(&len_crc, bytes.data() + 8, 4);
  std::memcpy(&data_crc, bytes.data() + 15, 4);
  EXPECT_EQ(len_crc, MaskCrc(Crc32c(bytes.data(), 8)));
  EXPECT_EQ(data_crc, MaskCrc(Crc32c("abc", 3)));
  FileReader f = FileReader::OverMemory("mem.tfrecord", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  TFRecordIndexOptions o;
  o.cache = false;
  auto idx = LoadOrBuildTFRecordIndex(f, o);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_EQ(idx.value().records.size(), 2u);
  std::vector<uint8_t> buf;
  uint32_t stored = 0;
  auto data = ReadTFRecord(f, idx.value().records[0], 0, true, &buf, &stored);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(data.value()), 3), "abc");
  EXPECT_TRUE(CheckTFRecordCrc(f, idx.value().records[0], 0, Crc32c("abc", 3), stored).ok());
  Status bad = CheckTFRecordCrc(f, idx.value().records[0], 0, Crc32c("abd", 3), stored);
  EXPECT_EQ(bad.code(), Status::Code::kDataLoss);
  EXPECT_NE(bad.message().find("mem.tfrecord"), std::string::npos) << bad.ToString();
}

TEST(TFRecordFile, TheIndexIsSavedAndLoadedWhileTheFileIsUnchanged) {
  const std::string path = TempPath("idx.tfrecord"), dir = TempPath("idxdir");
  WriteFile(path, Records({"one", "two", "three"}));
  TFRecordIndexOptions o;
  o.index_dir = dir;
  {
    FileReader f = FileReader::Open(path).value();
    auto built = LoadOrBuildTFRecordIndex(f, o);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    EXPECT_FALSE(built.value().loaded_from_cache);
    EXPECT_EQ(built.value().cache_path.rfind(dir, 0), 0u) << built.value().cache_path;
    auto loaded = LoadOrBuildTFRecordIndex(f, o);
    ASSERT_TRUE(loaded.ok());
    EXPECT_TRUE(loaded.value().loaded_from_cache);
    EXPECT_EQ(loaded.value().records.size(), 3u);
  }
  usleep(10000);
  WriteFile(path, Records({"one", "two"}));  // changed: built again
  FileReader f = FileReader::Open(path).value();
  auto again = LoadOrBuildTFRecordIndex(f, o);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value().loaded_from_cache);
  EXPECT_EQ(again.value().records.size(), 2u);
  std::remove(path.c_str());
  std::remove(again.value().cache_path.c_str());
}

TEST(TFRecordFile, ADamagedTailIsDataLossOrLeftOut) {
  std::string bytes = Records({"good", "also good"});
  bytes += std::string("\x05\x00\x00\x00\x00\x00\x00\x00garbage", 15);  // a length whose CRC is wrong
  FileReader f = FileReader::OverMemory("tail.tfrecord", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  TFRecordIndexOptions o;
  o.cache = false;
  auto strict = LoadOrBuildTFRecordIndex(f, o);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(strict.status().message().find("tail.tfrecord"), std::string::npos) << strict.status().ToString();
  o.skip_bad = true;
  auto lenient = LoadOrBuildTFRecordIndex(f, o);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  EXPECT_EQ(lenient.value().records.size(), 2u);
  EXPECT_GT(lenient.value().bad_tail_offset, 0u);
  EXPECT_FALSE(lenient.value().bad_tail_reason.empty());
}

}  // namespace
}  // namespace stoker
