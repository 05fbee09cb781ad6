// io/record_file_dataset: raw and .npy record files, and their errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/record_file_dataset.h"
#include "test_files.h"

namespace stoker {
namespace {

using testing::TempFile;
using testing::Floats;

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

}  // namespace
}  // namespace stoker
