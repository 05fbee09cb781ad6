// ReadProcessMemory, MemoryLimitBytes and SystemShmemBytes against this
// process and a child that dirties known amounts of private and shared memory.
#include "proc/proc_memory.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "shared/shared_block.h"

namespace stoker {
namespace {

TEST(ProcMemory, SeesPrivateAndSharedPages) {
  auto before = ReadProcessMemory(getpid());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  std::vector<char> priv(64 << 20);
  std::memset(priv.data(), 1, priv.size());
  auto after = ReadProcessMemory(getpid());
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after.value().uss, before.value().uss + (60 << 20)) << "64 MiB of private pages";
  EXPECT_GE(after.value().pss, after.value().uss);
  EXPECT_GE(after.value().rss, after.value().pss);
  // 32 MiB of shared memory mapped by this process and a child: each is
  // charged half of it in PSS.
  auto block = SharedBlock::Create(32 << 20, "test-pss");
  ASSERT_TRUE(block.ok());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    const volatile uint8_t* pages = block.value()->data();  // (volatile: each read happens)
    uint8_t sum = 0;
    for (uint64_t o = 0; o < block.value()->size(); o += 4096) sum = static_cast<uint8_t>(sum + pages[o]);
    (void)sum;
    (void)write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto child = ReadProcessMemory(pid);
  ASSERT_TRUE(child.ok());
  EXPECT_NEAR(static_cast<double>(child.value().pss_shmem), 16 << 20, 2 << 20);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_FALSE(ReadProcessMemory(pid).ok()) << "a reaped process has no memory to read";
}

// A forked child's own memory: what it writes privately counts, the pages it
// still shares with its parent do not, nor do those of the mapping left out.
TEST(ProcMemory, PrivateBytesOutsideAMapping) {
  std::vector<char> inherited(32 << 20);
  std::memset(inherited.data(), 1, inherited.size());  // (the parent's: shared with the child after the fork)
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char> own(24 << 20);
    std::memset(own.data(), 2, own.size());
    // A named mapping whose written pages are the child's alone (a private
    // mapping of a memfd: copies), to be left out.
    const int fd = memfd_create("test-left-out", 0);
    if (fd < 0 || ftruncate(fd, 16 << 20) != 0) _exit(1);
    void* named = mmap(nullptr, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (named == MAP_FAILED) _exit(1);
    std::memset(named, 3, 16 << 20);
    (void)write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto all = ReadPrivateBytesOutside(pid, "");
  auto outside = ReadPrivateBytesOutside(pid, "test-left-out");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(all.ok() && outside.ok());
  EXPECT_GE(outside.value(), uint64_t{23} << 20) << "the child's own 24 MiB";
  // (pages of the parent's the child has not written stay shared: not its own)
  EXPECT_LT(outside.value(), uint64_t{40} << 20) << "not the 32 MiB it shares with its parent";
  EXPECT_NEAR(static_cast<double>(all.value() - outside.value()), 16 << 20, 1 << 20) << "the mapping left out";
  EXPECT_FALSE(ReadPrivateBytesOutside(pid, "").ok());
}

TEST(ProcMemory, LimitsAndShmem) {
  auto limit = MemoryLimitBytes();
  ASSERT_TRUE(limit.ok());
  EXPECT_GT(limit.value(), uint64_t{64} << 20);
  auto shmem = SystemShmemBytes();
  ASSERT_TRUE(shmem.ok());
  auto block = SharedBlock::Create(16 << 20, "test-shmem");
  ASSERT_TRUE(block.ok());
  auto more = SystemShmemBytes();
  ASSERT_TRUE(more.ok());
  // Other processes change Shmem too; a memfd's pages do show up in it.
  EXPECT_GE(more.value() + (4 << 20), shmem.value() + (16 << 20));
}

}  // namespace
}  // namespace stoker
