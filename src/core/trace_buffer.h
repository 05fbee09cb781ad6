// The trace's own implementation (trace.cc), as stage.cc's table names it.
// Not for other files: they call trace.h, which goes through the active
// StageRuntime.
#ifndef STOKER_CORE_TRACE_BUFFER_H_
#define STOKER_CORE_TRACE_BUFFER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "core/stage.h"

namespace stoker::trace_internal {

const std::atomic<uint32_t>* OnWord();
inline bool Recording() { return OnWord()->load(std::memory_order_relaxed) != 0; }
void Slice(Stage s, int64_t t0, int64_t t1);
void Flow(bool out, uint64_t id);
void Counter(const char* name, const std::pair<const char*, double>* values, size_t n);
void Instant(const char* name, const char* args_json);
void NameThread(const char* name);
int AddSource(std::function<void()> sample);
void RemoveSource(int id);
int64_t FlushThread(bool now);

}  // namespace stoker::trace_internal

#endif  // STOKER_CORE_TRACE_BUFFER_H_
