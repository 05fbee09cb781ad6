#include "shm/arena.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

namespace stoker {
namespace {

TEST(Arena, CreateLaysOutControlArea) {
  auto a = Arena::Create({2, 16, 64 << 20});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Arena& ar = *a.value();
  ControlBlock* c = ar.control();
  EXPECT_EQ(c->magic, kArenaMagic);
  EXPECT_EQ(c->num_workers, 2u);
  EXPECT_EQ(c->max_slots, 16u);
  EXPECT_EQ(c->data_offset % 4096, 0u);
  EXPECT_EQ(ar.committed_bytes(), c->data_offset);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ar.slot(1)) - reinterpret_cast<uintptr_t>(ar.slot(0)), sizeof(SlotHeader));
}

TEST(Arena, NothingNamedInDevShm) {
  auto a = Arena::Create({1, 4, 16 << 20});
  ASSERT_TRUE(a.ok());
  std::string link(256, 0);
  std::string path = "/proc/self/fd/" + std::to_string(a.value()->fd());
  ssize_t n = readlink(path.c_str(), link.data(), link.size());
  ASSERT_GT(n, 0);
  link.resize(n);
  EXPECT_EQ(link.rfind("/memfd:stoker-arena", 0), 0u) << link;
}

TEST(Arena, GrowIsVisibleToAnAttachedMapping) {
  auto a = Arena::Create({1, 4, 64 << 20});
  ASSERT_TRUE(a.ok());
  Arena& ar = *a.value();
  const uint64_t off = ar.control()->data_offset;
  ASSERT_TRUE(ar.Grow(off + (1 << 20)).ok());
  auto b = Arena::Attach(ar.fd());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::memcpy(ar.base() + off, "hello", 6);
  EXPECT_STREQ(reinterpret_cast<char*>(b.value()->base() + off), "hello");
  // Growth after attaching needs no remap.
  ASSERT_TRUE(ar.Grow(off + (4 << 20)).ok());
  std::memcpy(ar.base() + off + (3 << 20), "later", 6);
  EXPECT_STREQ(reinterpret_cast<char*>(b.value()->base() + off + (3 << 20)), "later");
  EXPECT_TRUE(ar.Contains(ar.base() + off, 1 << 20));
  EXPECT_FALSE(ar.Contains(ar.base() + off + (4 << 20), 1));
}

// Writes "parent" at the start of `ar`'s data, has a forked child write
// "child" there, and returns what this process reads afterwards.
std::string ReadAfterForkedChildWrites(Arena& ar) {
  const uint64_t off = ar.control()->data_offset;
  EXPECT_TRUE(ar.Grow(off + 4096).ok());
  std::memcpy(ar.base() + off, "parent", 7);
  pid_t child = fork();
  if (child == 0) {
    std::memcpy(ar.base() + off, "child", 6);
    _exit(0);
  }
  int st;
  waitpid(child, &st, 0);
  return reinterpret_cast<char*>(ar.base() + off);
}

TEST(Arena, SharedAcrossFork) {
  auto a = Arena::Create({1, 4, 16 << 20});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ReadAfterForkedChildWrites(*a.value()), "child");
}

TEST(Arena, GrowPastReserveFails) {
  auto a = Arena::Create({1, 4, 8 << 20});
  ASSERT_TRUE(a.ok());
  Status s = a.value()->Grow(a.value()->reserve_bytes() + 4096);
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
}

TEST(Arena, PrivateArenaBacksAndReturnsItsPages) {
  ArenaGeometry g{1, 4, 64 << 20};
  g.process_shared = false;
  auto a = Arena::Create(g);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Arena& ar = *a.value();
  EXPECT_FALSE(ar.process_shared());
  EXPECT_EQ(ar.fd(), -1) << "nothing to attach to";
  EXPECT_EQ(ar.control()->magic, kArenaMagic);
  const uint64_t off = ar.control()->data_offset;
  EXPECT_GE(ar.ResidentBytes(), off) << "the control area is written at creation";
  constexpr uint64_t kLen = 8 << 20;
  ASSERT_TRUE(ar.Grow(off + kLen).ok());
  const uint64_t before = ar.ResidentBytes();
  ASSERT_TRUE(ar.Populate(off, kLen).ok());
  const uint64_t backed = ar.ResidentBytes();
  EXPECT_EQ(backed, before + kLen);
  std::memset(ar.base() + off, 7, kLen);
  ASSERT_TRUE(ar.Discard(off, kLen).ok());
  EXPECT_LE(ar.ResidentBytes(), before);
  EXPECT_EQ(ar.base()[off], 0) << "a discarded range reads as zeros";
  EXPECT_EQ(ar.base()[off + kLen - 1], 0);
  EXPECT_TRUE(ar.Grow(ar.reserve_bytes() + 4096).IsResourceExhausted());
}

TEST(Arena, PrivateArenaIsNotSharedWithAForkedChild) {
  ArenaGeometry g{1, 4, 16 << 20};
  g.process_shared = false;
  auto a = Arena::Create(g);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ReadAfterForkedChildWrites(*a.value()), "parent");
}

TEST(Arena, AttachRejectsOtherFiles) {
  int fd = memfd_create("not-an-arena", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  auto r = Arena::Attach(fd);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a stoker arena"), std::string::npos);
  close(fd);
}

}  // namespace
}  // namespace stoker
