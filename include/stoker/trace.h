// stoker/trace.h -- recording a trace of the pipeline.
//
// A trace is a Chrome trace-event JSON file (Perfetto, ui.perfetto.dev, opens
// it): a track per process and per thread of stoker's (the training loop, each
// worker process, reader and fetcher threads) with slices named read, fetch,
// decode, transform, collate, publish, wait and h2d, a flow from each batch's
// production to the next() that received it, and counters at 20 Hz (the slot
// pool's bytes by state, queue depths, each worker's RSS, a streaming
// dataset's cache).  docs/trace.md describes the file.
//
// One trace at a time per process tree.  Start it in the process that runs the
// training loop; workers forked from it (fork start method) record into it.
#ifndef STOKER_TRACE_H_
#define STOKER_TRACE_H_

#include <string>

#include "stoker/status.h"

namespace stoker {

// Starts recording; `process_name` names this process's track.  Fails when a
// trace is already being recorded or `path`'s directory is not writable.
Status StartTrace(const std::string& path, const std::string& process_name = "training loop");

// Stops recording and writes the file (whole or not at all); returns its path.
// Workers' events still buffered are waited for up to about a second.
Result<std::string> StopTrace();

// Whether a trace is being recorded.
bool TraceRecording();

}  // namespace stoker

#endif  // STOKER_TRACE_H_
