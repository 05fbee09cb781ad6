// What a thread is doing, timed: the one vocabulary of pipeline stages.
//
// Every thread that produces or waits for batches says which stage it is in
// (EnterStage/LeaveStage, or a StageScope).  Two things are made of it:
//  * a clock per thread and stage (ThreadStageTimes), always on: a worker adds
//    its batch's stage times to its shared WorkerBlock, and stats() gives the
//    bottleneck verdict from them (python/stoker/_verdict.py);
//  * the trace's slices (trace.h), when a trace is being recorded.
// Stages nest (a decode inside a read): the clock counts only the innermost
// stage, the trace draws each.  A transition costs one clock read.
//
// Extension modules that link their own copy of the core (_stoker_vision,
// _stoker_parquet) route their stages to _stoker's copy (UseStageRuntime), so a
// decode in the image codec's module lands on the reader thread's one clock.
#ifndef STOKER_CORE_STAGE_H_
#define STOKER_CORE_STAGE_H_

#include <cstdint>

namespace stoker {

enum class Stage : uint8_t {
  kRead = 0,     // a dataset's reads: Python __getitem__, a native dataset's Read
  kFetch,        // a download from a store (a fetcher thread)
  kDecode,       // an image or record decoded
  kTransform,    // a transform applied
  kCollate,      // a batch collated into its slot (a collate_fn included)
  kPublish,      // the batch handed over to the main process
  kWaitStore,    // a reader waiting for a download
  kWaitMemory,   // a worker waiting for room in the slot pool
  kWaitBatch,    // the training loop waiting for its next batch
  kH2D,          // pinning and the copy to the accelerator
  kCount
};
inline constexpr int kStageCount = static_cast<int>(Stage::kCount);

// The trace's slice name: read, fetch, decode, transform, collate, publish,
// wait or h2d (docs/trace.md); and what a wait is for ("store", "memory",
// "batch"), "" for the others.
const char* StageName(Stage s);
const char* StageDetail(Stage s);

struct StageTimes {
  uint64_t ns[kStageCount] = {};
};

// This thread's time in each stage since it started.
StageTimes ThreadStageTimes();

void EnterStage(Stage s);
void LeaveStage();
// Leaves every stage this thread is in (a worker between two batches);
// returns the clock's time it read (0 when the thread was in none).
int64_t LeaveAllStages();
// Leaves every stage and enters `s`, with one clock read; returns its time.
int64_t SwitchStage(Stage s);

class StageScope {
 public:
  explicit StageScope(Stage s) { EnterStage(s); }
  ~StageScope() { LeaveStage(); }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;
};

// CLOCK_MONOTONIC in nanoseconds: the clock of stages and traces (the one
// every process of a machine shares).
int64_t StageClockNanos();

}  // namespace stoker

#endif  // STOKER_CORE_STAGE_H_
