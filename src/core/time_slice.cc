#include "core/time_slice.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace stoker {

namespace {

// struct sched_attr (linux/sched/types.h; glibc 2.36 has no wrapper).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};

}  // namespace

bool RequestTimeSlice(uint64_t nanoseconds) {
#if defined(SYS_sched_setattr)
  if (sched_getscheduler(0) != SCHED_OTHER) return false;  // (a real-time or idle thread: left alone)
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  if (nice == -1 && errno != 0) return false;
  SchedAttr a{};
  a.size = sizeof a;
  a.sched_policy = SCHED_OTHER;
  a.sched_nice = nice;  // sched_setattr sets the nice value too: the same one
  a.sched_runtime = nanoseconds;
  return syscall(SYS_sched_setattr, 0, &a, 0) == 0;
#else
  (void)nanoseconds;
  return false;
#endif
}

}  // namespace stoker
