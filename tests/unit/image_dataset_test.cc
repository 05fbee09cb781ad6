// ImageFolderDataset (src/vision/image_dataset.cc): files, labels, the
// file named in errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "image_test_util.h"
#include "stoker/image_dataset.h"

namespace stoker {
namespace {

using testing::Gradient;
using testing::Jpeg;
using testing::Op;

TEST(ImageFolderDataset, ReadsLabelsAndNamesTheBadFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("stoker_image_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto jpg = Jpeg(Gradient(40, 60), 40, 60);
  const std::string good = (dir / "a.jpg").string(), cut = (dir / "b.jpg").string();
  std::ofstream(good, std::ios::binary).write(reinterpret_cast<const char*>(jpg.data()), jpg.size());
  std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(jpg.data()), jpg.size() / 2);
  auto p = ImagePipeline::Make({Op(ImageOp::Kind::kCenterCrop, 32, 32)}).value();
  auto ds = ImageFolderDataset({good, cut, (dir / "missing.jpg").string()}, {3, 4, 5}, p);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto& d = *ds.value();
  EXPECT_EQ(d.structure(), SampleStructure::kTuple);
  ASSERT_EQ(d.fields().size(), 2u);
  EXPECT_EQ(d.fields()[0].shape, (std::vector<int64_t>{3, 32, 32}));
  std::vector<uint8_t> img(3 * 32 * 32);
  int64_t label = 0;
  uint8_t* dst[2] = {img.data(), reinterpret_cast<uint8_t*>(&label)};
  ASSERT_TRUE(d.Read(0, dst).ok());
  EXPECT_EQ(label, 3);
  Status bad = d.Read(1, dst);
  EXPECT_TRUE(bad.IsDataLoss());
  EXPECT_NE(bad.message().find(cut), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("truncated"), std::string::npos) << bad.message();
  Status missing = d.Read(2, dst);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing.jpg"), std::string::npos) << missing.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
