// cache/lock_fd: flock-based locks between processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "cache/lock_fd.h"
#include "cache/shard_cache.h"
#include "core/unique_fd.h"
#include "stoker/loader.h"
#include "stoker/shard_index.h"
#include "stoker/streaming.h"
#include "watchdog.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

TEST(LockFd, AForkedChildDoesNotKeepTheParentsLock) {
  // A child forked while the parent holds a cache lock, and still alive
  // when the parent lets go of it: the lock is free (the child's copy of
  // the descriptor points at /dev/null).  A plain descriptor's copy keeps it.
  testing::Watchdog wd(std::chrono::seconds(30), "LockFd fork test");
  const std::string path = ::testing::TempDir() + "lockfd_" + std::to_string(getpid());
  for (bool registered : {true, false}) {
    LockFd locked;
    UniqueFd plain;
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    if (registered) locked.reset(fd); else plain.reset(fd);
    ASSERT_EQ(flock(fd, LOCK_EX), 0);
    int go[2], ready[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    if (child == 0) {  // running (past fork's handlers) until the parent closes its end of `go`
      close(go[1]);
      close(ready[0]);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(1);
      while (read(go[0], &c, 1) > 0) {
      }
      _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    if (registered) locked.reset(); else plain.reset();  // the parent lets go
    const int again = open(path.c_str(), O_RDWR | O_CLOEXEC);
    const bool free = flock(again, LOCK_EX | LOCK_NB) == 0;
    close(again);
    close(go[1]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_EQ(free, registered) << (registered ? "the child kept the parent's lock"
                                               : "a plain descriptor's copy should keep it (control)");
  }
  EXPECT_EQ(LockFd::RecordedForTest(), 0);
  unlink(path.c_str());
}

}  // namespace
}  // namespace stoker
