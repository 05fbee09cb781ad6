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
#include "stoker/loader.h"

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

TEST(ImageFolderDataset, LoadsNamedFieldsThroughTheCppLoader) {
  const auto dir = std::filesystem::temp_directory_path() / ("stoker_image_loader_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto jpg = Jpeg(Gradient(40, 60), 40, 60);
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  for (int i = 0; i < 10; ++i) {
    paths.push_back((dir / (std::to_string(i) + ".jpg")).string());
    labels.push_back(i % 3);
    std::ofstream(paths.back(), std::ios::binary).write(reinterpret_cast<const char*>(jpg.data()), jpg.size());
  }
  auto rrc = Op(ImageOp::Kind::kRandomResizedCrop, 16, 16);
  auto p = ImagePipeline::Make({rrc}).value();
  auto epoch = [&](uint64_t seed) {
    LoaderOptions o;
    o.batch_size = 4;
    o.num_workers = 2;
    o.seed = seed;
    auto loader = Loader::Create(ImageFolderDataset(paths, labels, p).value(), o);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    std::vector<uint8_t> pixels;
    std::vector<int64_t> got;
    for (const Batch& b : *loader.value()) {
      const BatchField* image = b.field("image");
      const BatchField* label = b.field("label");
      EXPECT_TRUE(image && label);
      if (!image || !label) break;
      EXPECT_EQ(image->tensor.shape, (std::vector<int64_t>{static_cast<int64_t>(b.size()), 3, 16, 16}));
      const auto* px = static_cast<const uint8_t*>(image->tensor.data);
      pixels.insert(pixels.end(), px, px + image->tensor.nbytes);
      const auto* l = reinterpret_cast<const int64_t*>(label->tensor.data);
      got.insert(got.end(), l, l + b.size());
    }
    EXPECT_EQ(got, labels);
    return pixels;
  };
  EXPECT_EQ(epoch(1), epoch(1));  // the loader's seed decides the crops
  EXPECT_NE(epoch(1), epoch(2));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
