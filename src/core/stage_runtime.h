// The functions behind stage.h and trace.h, as one table.  Each extension
// module links its own copy of the core; the copies in _stoker_vision and
// _stoker_parquet take _stoker's table (UseStageRuntime, handed over in a
// capsule at import), so there is one clock per thread and one trace per
// process whichever module's code runs.
#ifndef STOKER_CORE_STAGE_RUNTIME_H_
#define STOKER_CORE_STAGE_RUNTIME_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "core/stage.h"

namespace stoker {

struct StageRuntime {
  void (*enter)(Stage);
  void (*leave)();
  int64_t (*leave_all)();
  int64_t (*switch_to)(Stage);
  StageTimes (*times)();
  const std::atomic<uint32_t>* trace_on;
  void (*flow)(bool out, uint64_t id);
  void (*counter)(const char* name, const std::pair<const char*, double>* values, size_t n);
  void (*instant)(const char* name, const char* args_json);
  void (*name_thread)(const char* name);
  int (*add_source)(std::function<void()> sample);
  void (*remove_source)(int id);
  int64_t (*flush_thread)(bool now);
};

// This copy's own table, and the one its stages go to (its own until
// UseStageRuntime).
const StageRuntime* OwnStageRuntime();
const StageRuntime* ActiveStageRuntime();
void UseStageRuntime(const StageRuntime* rt);

}  // namespace stoker

#endif  // STOKER_CORE_STAGE_RUNTIME_H_
