// cache/shard_index: the index.txt format.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "cache/lock_fd.h"
#include "cache/shard_cache.h"
#include "core/unique_fd.h"
#include "stoker/loader.h"
#include "stoker/shard_index.h"
#include "stoker/streaming.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

TEST(ShardIndex, ParsesFourColumnsAndRoundTrips) {
  auto r = ParseShardIndex("# c\na.tar 10\nb.tar 20 0000abcd\nc.tar 30 - 7\n\n", "idx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_FALSE(r.value()[0].has_crc);
  EXPECT_TRUE(r.value()[1].has_crc && r.value()[1].crc32c == 0xabcd && !r.value()[1].has_samples);
  EXPECT_TRUE(r.value()[2].has_samples && r.value()[2].samples == 7 && !r.value()[2].has_crc);
  auto again = ParseShardIndex(FormatShardIndex(r.value()), "again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()[2].samples, 7u);
  EXPECT_EQ(again.value()[1].crc32c, 0xabcdu);
  auto bad = ParseShardIndex("a 1\na 2\n", "idx");
  EXPECT_NE(bad.status().message().find("idx line 2: shard 'a' is listed twice"), std::string::npos);
  bad = ParseShardIndex("a 1 - x\n", "idx");
  EXPECT_NE(bad.status().message().find("samples 'x' is not a number"), std::string::npos);
  bad = ParseShardIndex("a 1 - 2 3\n", "idx");
  EXPECT_NE(bad.status().message().find("unexpected '3'"), std::string::npos);
}

}  // namespace
}  // namespace stoker
