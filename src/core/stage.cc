#include "core/stage.h"

#include <time.h>

#include "core/stage_runtime.h"
#include "core/trace_buffer.h"

namespace stoker {
namespace {

constexpr int kMaxDepth = 8;  // deeper stages are not timed (none nests so deep)

struct ThreadStages {
  StageTimes times;
  Stage stack[kMaxDepth];
  int64_t start[kMaxDepth];
  int depth = 0;
  int64_t since = 0;
};

thread_local ThreadStages t_stages;

void EnterAt(ThreadStages& t, Stage s, int64_t now) {
  if (t.depth > 0 && t.depth <= kMaxDepth)
    t.times.ns[static_cast<int>(t.stack[t.depth - 1])] += static_cast<uint64_t>(now - t.since);
  if (t.depth < kMaxDepth) {
    t.stack[t.depth] = s;
    t.start[t.depth] = now;
  }
  ++t.depth;
  t.since = now;
}

void EnterImpl(Stage s) { EnterAt(t_stages, s, StageClockNanos()); }

void LeaveAt(ThreadStages& t, int64_t now) {
  --t.depth;
  if (t.depth < kMaxDepth) {
    const Stage s = t.stack[t.depth];
    t.times.ns[static_cast<int>(s)] += static_cast<uint64_t>(now - t.since);
    if (trace_internal::Recording()) trace_internal::Slice(s, t.start[t.depth], now);
  }
  t.since = now;
}

void LeaveImpl() {
  ThreadStages& t = t_stages;
  if (t.depth > 0) LeaveAt(t, StageClockNanos());
}

int64_t LeaveAllImpl() {
  ThreadStages& t = t_stages;
  if (t.depth == 0) return 0;
  const int64_t now = StageClockNanos();
  while (t.depth > 0) LeaveAt(t, now);
  return now;
}

int64_t SwitchImpl(Stage s) {
  ThreadStages& t = t_stages;
  const int64_t now = StageClockNanos();
  while (t.depth > 0) LeaveAt(t, now);
  EnterAt(t, s, now);
  return now;
}

StageTimes TimesImpl() {
  ThreadStages& t = t_stages;
  StageTimes out = t.times;
  if (t.depth > 0 && t.depth <= kMaxDepth)  // the stage it is in, up to now
    out.ns[static_cast<int>(t.stack[t.depth - 1])] += static_cast<uint64_t>(StageClockNanos() - t.since);
  return out;
}

const StageRuntime kOwn = {
    EnterImpl,
    LeaveImpl,
    LeaveAllImpl,
    SwitchImpl,
    TimesImpl,
    trace_internal::OnWord(),
    trace_internal::Flow,
    trace_internal::Counter,
    trace_internal::Instant,
    trace_internal::NameThread,
    trace_internal::AddSource,
    trace_internal::RemoveSource,
    trace_internal::FlushThread,
};

const StageRuntime* g_active = &kOwn;

}  // namespace

const StageRuntime* OwnStageRuntime() { return &kOwn; }
const StageRuntime* ActiveStageRuntime() { return g_active; }
void UseStageRuntime(const StageRuntime* rt) { g_active = rt ? rt : &kOwn; }

const char* StageName(Stage s) {
  switch (s) {
    case Stage::kRead: return "read";
    case Stage::kFetch: return "fetch";
    case Stage::kDecode: return "decode";
    case Stage::kTransform: return "transform";
    case Stage::kCollate: return "collate";
    case Stage::kPublish: return "publish";
    case Stage::kWaitStore:
    case Stage::kWaitMemory:
    case Stage::kWaitBatch: return "wait";
    case Stage::kH2D: return "h2d";
    case Stage::kCount: break;
  }
  return "?";
}

const char* StageDetail(Stage s) {
  switch (s) {
    case Stage::kWaitStore: return "store";
    case Stage::kWaitMemory: return "memory";
    case Stage::kWaitBatch: return "batch";
    default: return "";
  }
}

StageTimes ThreadStageTimes() { return g_active->times(); }
void EnterStage(Stage s) { g_active->enter(s); }
void LeaveStage() { g_active->leave(); }
int64_t LeaveAllStages() { return g_active->leave_all(); }
int64_t SwitchStage(Stage s) { return g_active->switch_to(s); }

int64_t StageClockNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace stoker
