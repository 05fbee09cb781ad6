#include "sync/spsc_ring.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "sync/doorbell.h"
#include "watchdog.h"

namespace stoker {
namespace {

TEST(SpscRing, FifoAndCapacity) {
  auto l = std::make_unique<RingLayout>();
  SpscRing r(l.get());
  uint64_t v;
  EXPECT_TRUE(r.Empty());
  EXPECT_FALSE(r.TryPop(&v));
  for (uint64_t i = 0; i < RingLayout::kCapacity; ++i) ASSERT_TRUE(r.TryPush(i));
  EXPECT_TRUE(r.Full());
  EXPECT_FALSE(r.TryPush(999));
  for (uint64_t i = 0; i < RingLayout::kCapacity; ++i) {
    ASSERT_TRUE(r.TryPop(&v));
    EXPECT_EQ(v, i);
  }
  EXPECT_TRUE(r.Empty());
}

TEST(SpscRing, CloseIsSticky) {
  auto l = std::make_unique<RingLayout>();
  SpscRing r(l.get());
  ASSERT_TRUE(r.TryPush(7));
  r.Close();
  EXPECT_TRUE(r.Closed());
  uint64_t v;
  ASSERT_TRUE(r.TryPop(&v));  // drains what remains
  EXPECT_EQ(v, 7u);
}

// A producer process and a consumer process pass 200k values through a ring
// in shared memory, sleeping on doorbells when full/empty.
TEST(SpscRing, CrossProcessOrderWithWakeups) {
  testing::Watchdog dog(std::chrono::seconds(60), "CrossProcessOrderWithWakeups");
  struct Shared {
    RingLayout ring;
    DoorbellLayout not_empty, not_full;
  };
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* s = new (p) Shared{};
  constexpr uint64_t kN = 200000;
  pid_t child = fork();
  if (child == 0) {  // consumer
    SpscRing r(&s->ring);
    Doorbell ne(&s->not_empty), nf(&s->not_full);
    for (uint64_t i = 0; i < kN; ++i) {
      uint64_t v;
      ne.WaitUntil([&] { return !r.Empty(); }, -1);
      if (!r.TryPop(&v) || v != i) _exit(2);
      nf.Ring();
    }
    _exit(0);
  }
  SpscRing r(&s->ring);
  Doorbell ne(&s->not_empty), nf(&s->not_full);
  for (uint64_t i = 0; i < kN; ++i) {
    nf.WaitUntil([&] { return !r.Full(); }, -1);
    ASSERT_TRUE(r.TryPush(i));
    ne.Ring();
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "consumer saw values out of order";
  munmap(p, sizeof(Shared));
}

}  // namespace
}  // namespace stoker
