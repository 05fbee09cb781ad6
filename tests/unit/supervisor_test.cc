// proc/supervisor: every watched process's exit is reported once, with its
// code or signal; a forgotten one is not.
#include "proc/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "watchdog.h"

namespace stoker {
namespace {

struct Exits {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint32_t, ExitInfo> by_id;
  int reports = 0;
  void Add(uint32_t id, const ExitInfo& e) {
    std::lock_guard<std::mutex> g(mu);
    by_id[id] = e;
    ++reports;
    cv.notify_all();
  }
  void WaitFor(int n) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return reports >= n; });
  }
};

pid_t ChildThat(int how) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (how == 0) _exit(7);
    if (how == 1) pause();  // killed by the test
    if (how == 2) raise(SIGSEGV);
    _exit(0);
  }
  return pid;
}

TEST(Supervisor, ReportsExitCodesAndSignals) {
  testing::Watchdog dog(std::chrono::seconds(30), "Supervisor.Reports");
  Exits exits;
  Supervisor sup([&](uint32_t id, const ExitInfo& e) { exits.Add(id, e); });
  const pid_t a = ChildThat(0), b = ChildThat(1), c = ChildThat(2);
  ASSERT_TRUE(sup.Watch(10, a).ok());
  ASSERT_TRUE(sup.Watch(11, b).ok());
  ASSERT_TRUE(sup.Watch(12, c).ok());
  kill(b, SIGKILL);
  exits.WaitFor(3);
  EXPECT_EQ(exits.by_id[10].pid, a);
  EXPECT_EQ(exits.by_id[10].signal, 0);
  EXPECT_EQ(exits.by_id[10].exit_code, 7);
  EXPECT_EQ(exits.by_id[11].signal, SIGKILL);
  EXPECT_EQ(exits.by_id[12].signal, SIGSEGV);
  sup.Stop();
  EXPECT_EQ(exits.reports, 3);  // once each
}

TEST(Supervisor, AProcessAlreadyGoneIsReportedAndAForgottenOneIsNot) {
  testing::Watchdog dog(std::chrono::seconds(30), "Supervisor.Gone");
  Exits exits;
  Supervisor sup([&](uint32_t id, const ExitInfo& e) { exits.Add(id, e); });
  const pid_t gone = ChildThat(0);
  usleep(50000);  // (exited, not reaped: the supervisor still finds it)
  const pid_t forgotten = ChildThat(1);
  ASSERT_TRUE(sup.Watch(1, forgotten).ok());
  sup.Forget(1);
  kill(forgotten, SIGKILL);
  ASSERT_TRUE(sup.Watch(2, gone).ok());
  exits.WaitFor(1);
  usleep(50000);
  std::lock_guard<std::mutex> g(exits.mu);
  EXPECT_EQ(exits.reports, 1);
  EXPECT_EQ(exits.by_id.count(1), 0u);
  EXPECT_EQ(exits.by_id[2].exit_code, 7);
  waitpid(forgotten, nullptr, 0);
}

}  // namespace
}  // namespace stoker
