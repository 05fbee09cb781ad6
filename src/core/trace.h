// The trace: Chrome trace-event JSON that Perfetto (ui.perfetto.dev) and
// chrome://tracing open.  docs/trace.md has the vocabulary and the file.
//
// Recording is off unless StartTrace (include/stoker/trace.h) turned it on;
// off, a trace point costs one relaxed load.  The on/off word lives in a
// MAP_SHARED page made when the library loads, so the workers forked from the
// main process see a start and a stop.  Each thread appends its events, as
// binary records, to a buffer of its own; a thread writes its buffer to
// `<parts>/<pid>.part` once its events are 0.1 s old (a worker waiting for a
// task wakes for that), when it is large, and when a worker closes; the
// process that started the trace writes its own threads' at the stop, then
// formats every part into the file.
#ifndef STOKER_CORE_TRACE_H_
#define STOKER_CORE_TRACE_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "core/stage.h"
#include "core/stage_runtime.h"

namespace stoker {

inline bool TraceOn() {
  return ActiveStageRuntime()->trace_on->load(std::memory_order_relaxed) != 0;
}

// A flow arrow (the batch's production to the next() that received it):
// from the slice this thread is in (out) or into it.
void TraceFlow(bool out, uint64_t id);
// A counter track of this process: one sample of each named series.
void TraceCounter(const char* name, std::initializer_list<std::pair<const char*, double>> values);
void TraceCounterValues(const char* name, const std::pair<const char*, double>* values, size_t n);
// A moment on this thread with arguments (a JSON object's text, e.g. an
// autotune decision).
void TraceInstant(const char* name, const std::string& args_json);
// The name of this thread's track ("reader 2", "fetcher 0").
void TraceNameThread(const std::string& name);
// The name of this process's track ("worker 3"); a worker forked from the
// process that started the trace names itself.
void TraceNameProcess(const std::string& name);
// Writes this thread's buffered events to the process's part file, now or
// once they are 0.1 s old; returns the nanoseconds until they are due (-1:
// none waits).  A worker about to wait for a task waits at most that long, so
// what it recorded reaches the file while it idles (and the stop finds it).
int64_t TraceFlushThread(bool now);

// Counters are sampled by a thread of the process that started the trace, at
// 20 Hz: a source is called with nothing held but the sources' lock and calls
// TraceCounter.  Sources may be added whether a trace runs or not.
int AddTraceCounterSource(std::function<void()> sample);
void RemoveTraceCounterSource(int id);

// The flow id of batch `batch_id` of generation `generation` of the loader
// whose arena carries `loader_id`.
inline uint64_t BatchFlowId(uint64_t loader_id, uint64_t generation, uint64_t batch_id) {
  return loader_id ^ (generation << 40) ^ batch_id;
}

}  // namespace stoker

#endif  // STOKER_CORE_TRACE_H_
