// shared/string_list: a list of strings in a sealed block, shared across fork; blocks that are not one are rejected.
#include "shared/shared_block.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "shared/string_list.h"

namespace stoker {
namespace {

TEST(StringList, RoundTripsAndSharesAcrossFork) {
  StringListBuilder b;
  b.Add("");
  b.Add("a/b/c.jpg");
  b.Add("\xc3\xa9t\xc3\xa9");  // UTF-8
  auto block = b.Build("test-strings");
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  auto v = StringListView::Open(block.value());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v.value().size(), 3u);
  EXPECT_EQ(v.value()[0], "");
  EXPECT_EQ(v.value()[1], "a/b/c.jpg");
  EXPECT_EQ(v.value()[2], "\xc3\xa9t\xc3\xa9");
  pid_t pid = fork();
  if (pid == 0) _exit(v.value()[1] == "a/b/c.jpg" ? 0 : 1);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(StringList, RejectsBlocksThatAreNotStringLists) {
  auto raw = SharedBlock::Create(4096, "not-a-list");
  ASSERT_TRUE(raw.ok());
  EXPECT_FALSE(StringListView::Open(raw.value()).ok()) << "unsealed";
  ASSERT_TRUE(raw.value()->Seal().ok());
  auto v = StringListView::Open(raw.value());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("bad magic"), std::string::npos) << v.status().message();
  // A header whose count runs past the block.
  auto bad = SharedBlock::Create(4096, "bad-list");
  ASSERT_TRUE(bad.ok());
  StringListHeader h{kStringListMagic, 1000000, sizeof(StringListHeader), 0, 0};
  std::memcpy(bad.value()->data(), &h, sizeof h);
  ASSERT_TRUE(bad.value()->Seal().ok());
  EXPECT_FALSE(StringListView::Open(bad.value()).ok());
}

}  // namespace
}  // namespace stoker
