// NativeWorkers: C++ threads that play the part of worker processes for a
// NativeDataset.  Each thread takes tasks from its ring like a worker process
// (WorkerPort), reads the samples with the dataset's Read straight into the
// slot and publishes it; no Python, no GIL.  The Scheduler cannot tell them
// from processes.
//
// The threads that run may change (the autotuner): Start(id) adds worker
// id's thread, and once the scheduler has retired it (its ring closed: the
// thread leaves as at a shutdown) Join(id) joins it, so that Start(id) may
// run it again after Scheduler::Reclaim.  One thread calls these.
//
// Lifetime: Stop() (or the destructor) shuts the engine down and joins.
#ifndef STOKER_LOADER_NATIVE_WORKERS_H_
#define STOKER_LOADER_NATIVE_WORKERS_H_

#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loader/engine.h"
#include "stoker/native_dataset.h"

namespace stoker {

// How the reader threads share the CPU with the rest of the process:
// normal; low (nice 10); idle (SCHED_IDLE: they run when nothing else wants
// the CPU, so a training loop's threads never wait for them, but a process
// whose threads keep every core busy starves them).
enum class ReaderPriority : uint8_t { kNormal = 0, kLow = 1, kIdle = 2 };
Result<ReaderPriority> ParseReaderPriority(const std::string& name);  // "normal", "low", "idle"

// The reader loop of worker `id`: takes tasks from its ring until the
// engine shuts down, reading samples of `dataset` into the slots.  Run by
// NativeWorkers' threads, and by forked worker processes (C++ Loader).
void RunNativeWorker(std::shared_ptr<Arena> arena, NativeDataset& dataset, uint32_t id);

class NativeWorkers {
 public:
  // A thread for each of the first `start` worker ids of `engine` (0: for
  // every id, its num_workers), running when the constructor returns.
  NativeWorkers(std::shared_ptr<Engine> engine, std::shared_ptr<NativeDataset> dataset,
                ReaderPriority priority = ReaderPriority::kNormal, uint32_t start = 0);
  ~NativeWorkers();
  void Stop();
  // Starts worker `id`'s thread (nothing if it runs).
  Status Start(uint32_t id);
  // Joins worker `id`'s thread, which leaves once its ring is closed.
  void Join(uint32_t id);
  bool running(uint32_t id) const { return id < threads_.size() && threads_[id].joinable(); }

 private:
  void Run(uint32_t id, std::latch* started);
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<NativeDataset> dataset_;
  ReaderPriority priority_;
  std::vector<std::thread> threads_;  // by worker id (not joinable: not running)
  bool stopped_ = false;
};

}  // namespace stoker

#endif  // STOKER_LOADER_NATIVE_WORKERS_H_
