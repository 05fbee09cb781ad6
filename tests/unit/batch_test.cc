// api/batch: a Batch is a lease on a slot; its fields are views of it.
#include "stoker/batch.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "counting_dataset.h"
#include "stoker/loader.h"
#include "watchdog.h"

namespace stoker {
namespace {

using testing::Counting;

TEST(Batch, HoldsItsSlotUntilTheLastCopyGoes) {
  testing::Watchdog wd(std::chrono::seconds(60));
  LoaderOptions o;
  o.batch_size = 4;
  auto l = Loader::Create(std::make_shared<Counting>(40), o);
  std::vector<Batch> kept;
  Batch b;
  bool end = false;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(l.value()->Next(&b, &end).ok());
    kept.push_back(b);
  }
  b.reset();
  EXPECT_EQ(l.value()->stats().slots_held, 3u);
  Batch copy = kept[0];
  kept.clear();
  EXPECT_EQ(l.value()->stats().slots_held, 1u);
  EXPECT_EQ(copy.field("i")->tensor.as<int64_t>()[0], 0);
  copy.reset();
  EXPECT_EQ(l.value()->stats().slots_held, 0u);
}

TEST(Batch, FieldsByNameAndIndexWithTheirShapes) {
  LoaderOptions o;
  o.batch_size = 5;
  o.drop_last = true;
  auto l = Loader::Create(std::make_shared<Counting>(12), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Batch b;
  bool end = false;
  ASSERT_TRUE(l.value()->Next(&b, &end).ok());
  ASSERT_TRUE(b.valid());
  EXPECT_EQ(b.id(), 0u);
  EXPECT_EQ(b.size(), 5u);
  ASSERT_EQ(b.fields().size(), 2u);
  EXPECT_EQ(b.field("nope"), nullptr);
  EXPECT_EQ(b.field("f")->tensor.shape, (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(b[0].shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(b.nbytes(), 5u * 8 + 5u * 2 * 4);
  EXPECT_EQ(b[1].as<float>()[9], 4.5f);
  b.reset();
  EXPECT_FALSE(b.valid());
}

}  // namespace
}  // namespace stoker
