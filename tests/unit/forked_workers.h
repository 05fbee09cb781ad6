// Forked worker processes for the engine and scheduler tests: a worker
// body that fills each slot with its first index (asking for space, handing
// a task back when there is no room), an engine, and the fork and reap.
#ifndef STOKER_TESTS_FORKED_WORKERS_H_
#define STOKER_TESTS_FORKED_WORKERS_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "loader/engine.h"
#include "loader/worker_port.h"

namespace stoker::testing {

// Batch sizes that jump with the first index, 200 KiB to 1000 KiB (bytes == 0 in RunWorker).
inline uint64_t VariableBytes(int64_t first_index) { return (200 << 10) * (1 + first_index / 60) + 123; }

// Worker body: for each task, writes `bytes` bytes (VariableBytes when 0) of
// the first index (asking for space when needed) and publishes; hands the
// task back when the main process has no room.  Optional delays: on every
// even batch id, and on the worker's first task.
inline void RunWorker(std::shared_ptr<Arena> arena, uint32_t id, uint64_t fixed_bytes, useconds_t delay_even = 0,
                      useconds_t delay_first = 0) {
  WorkerPort port(arena, id);
  Task t;
  for (;;) {
    Status s = port.Next(&t, -1);
    if (s.IsClosed()) _exit(0);
    if (!s.ok()) _exit(2);
    if (t.msg != TaskMsg::kFill) continue;
    int64_t first_index = -1;
    if (t.payload_bytes >= 8) std::memcpy(&first_index, t.payload, 8);
    if (delay_even && t.batch_id % 2 == 0) usleep(delay_even);
    if (delay_first) usleep(delay_first);
    delay_first = 0;
    const uint64_t bytes = fixed_bytes ? fixed_bytes : VariableBytes(first_index);
    auto region = port.Reserve(t.slot, bytes);
    if (region.status().IsCancelled()) {
      port.Publish(t.slot, SlotResult::kCancelled, 0);
      continue;
    }
    if (!region.ok()) _exit(3);
    std::memset(region.value(), static_cast<int>(first_index & 0xff), bytes);
    port.Publish(t.slot, SlotResult::kOk, bytes);
  }
}

inline std::shared_ptr<Engine> MakeEngine(uint32_t workers, uint64_t max_memory = 64 << 20) {
  auto e = Engine::Create(EngineOptions{workers, max_memory, 64});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.value();
}

inline pid_t ForkWorker(const std::shared_ptr<Engine>& e, uint32_t id, uint64_t bytes, useconds_t delay = 0,
                        useconds_t delay_first = 0) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a failed ASSERT must not leave workers behind
    RunWorker(std::shared_ptr<Arena>(e, &e->arena()), id, bytes, delay, delay_first);
  }
  EXPECT_TRUE(e->Watch(id, pid).ok());
  return pid;
}

inline void Reap(const std::shared_ptr<Engine>& e, std::vector<pid_t> pids) {
  for (uint32_t w = 0; w < pids.size(); ++w) e->Forget(w);
  e->Shutdown();
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "worker exit status " << st;
  }
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_FORKED_WORKERS_H_
