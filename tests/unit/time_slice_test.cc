// core/time_slice.h: the fetchers' short time slices.
#include "core/time_slice.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace stoker {
namespace {

struct Attr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
};

bool KernelAtLeast(int major, int minor) {
  utsname u{};
  int a = 0, b = 0;
  return uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &a, &b) == 2 && (a > major || (a == major && b >= minor));
}

TEST(TimeSlice, KeepsTheNiceValueAndIsWhatTheKernelReportsBack) {
  std::thread t([] {
    // A thread already niced (a lower priority needs no privilege) keeps it.
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 7), 0);
    const bool took = RequestTimeSlice(kFetcherTimeSliceNs);
    EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), 7);
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    if (KernelAtLeast(6, 12)) {  // custom slices for fair threads since 6.12
      ASSERT_TRUE(took);
      Attr a{};
      ASSERT_EQ(syscall(SYS_sched_getattr, 0, &a, sizeof a, 0), 0);
      EXPECT_EQ(a.sched_runtime, kFetcherTimeSliceNs);
      EXPECT_EQ(a.sched_nice, 7);
    }
  });
  t.join();
}

TEST(TimeSlice, LeavesAnIdleThreadAlone) {
  std::thread t([] {
    sched_param p{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_IDLE, &p), 0);
    EXPECT_FALSE(RequestTimeSlice(kFetcherTimeSliceNs));
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  });
  t.join();
}

}  // namespace
}  // namespace stoker
