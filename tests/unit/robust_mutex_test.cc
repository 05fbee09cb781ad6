// shared/robust_mutex: process-shared, recursive or not, a timeout, and a
// holder that dies leaves the mutex to the next locker, who is told.
#include "shared/robust_mutex.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "watchdog.h"

namespace stoker {
namespace {

pthread_mutex_t* SharedMutex(bool recursive) {
  void* p = mmap(nullptr, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  auto* m = static_cast<pthread_mutex_t*>(p);
  EXPECT_TRUE(InitRobustMutex(m, recursive).ok());
  return m;
}

TEST(RobustMutex, TimeoutWhileAnotherProcessHoldsIt) {
  testing::Watchdog dog(std::chrono::seconds(30), "RobustMutex.Timeout");
  pthread_mutex_t* m = SharedMutex(false);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    bool died = false;
    if (!LockRobustMutex(m, -1, &died).ok()) _exit(1);
    (void)!write(fds[1], "x", 1);
    pause();
  }
  char c;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  bool died = false;
  Status st = LockRobustMutex(m, 20'000'000, &died);
  EXPECT_EQ(st.code(), Status::Code::kTimeout) << st.ToString();
  st = LockRobustMutex(m, 0, &died);  // try once
  EXPECT_EQ(st.code(), Status::Code::kTimeout) << st.ToString();
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  // The holder died holding it: taken, made consistent, and we are told.
  ASSERT_TRUE(LockRobustMutex(m, -1, &died).ok());
  EXPECT_TRUE(died);
  ASSERT_TRUE(UnlockRobustMutex(m).ok());
  died = false;
  ASSERT_TRUE(LockRobustMutex(m, -1, &died).ok());
  EXPECT_FALSE(died);  // consistent again: the next locker is not told
  ASSERT_TRUE(UnlockRobustMutex(m).ok());
  munmap(m, sizeof(pthread_mutex_t));
}

TEST(RobustMutex, RecursiveLocksNest) {
  pthread_mutex_t* m = SharedMutex(true);
  bool died = false;
  ASSERT_TRUE(LockRobustMutex(m, -1, &died).ok());
  ASSERT_TRUE(LockRobustMutex(m, 0, &died).ok());
  ASSERT_TRUE(UnlockRobustMutex(m).ok());
  ASSERT_TRUE(UnlockRobustMutex(m).ok());
  EXPECT_FALSE(UnlockRobustMutex(m).ok());  // not held any more
  munmap(m, sizeof(pthread_mutex_t));
}

}  // namespace
}  // namespace stoker
