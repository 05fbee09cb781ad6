// shared/shared_block: creation, sealing, reopening by fd and by /proc path, and rejection of what is not a block.
#include "shared/shared_block.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>


namespace stoker {
namespace {

TEST(SharedBlock, WritesAreSeenThroughAnotherMapping) {
  auto a = SharedBlock::Create(8192, "test-block");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::memcpy(a.value()->data(), "hello", 5);
  auto b = SharedBlock::OpenPath("/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(a.value()->fd()));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b.value()->size(), 8192u);
  EXPECT_EQ(std::memcmp(b.value()->data(), "hello", 5), 0);
  b.value()->data()[0] = 'j';
  EXPECT_EQ(a.value()->data()[0], 'j');
}

TEST(SharedBlock, SealedBlocksAreReadOnlyEverywhere) {
  auto a = SharedBlock::Create(4096, "test-sealed");
  ASSERT_TRUE(a.ok());
  a.value()->data()[0] = 42;
  ASSERT_TRUE(a.value()->Seal().ok());
  EXPECT_TRUE(a.value()->sealed());
  EXPECT_EQ(a.value()->data()[0], 42) << "contents survive the remap";
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a.value()->fd(), 0), MAP_FAILED)
      << "nobody can map a sealed block writable";
  auto b = SharedBlock::Open(a.value()->fd());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b.value()->sealed());
  EXPECT_EQ(b.value()->data()[0], 42);
}

TEST(SharedBlock, ClearErrors) {
  EXPECT_EQ(SharedBlock::Create(0, "x").status().code(), Status::Code::kInvalidArgument);
  auto missing = SharedBlock::OpenPath("/proc/self/fd/987654");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/proc/self/fd/987654"), std::string::npos);
}

}  // namespace
}  // namespace stoker
