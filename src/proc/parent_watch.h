// ParentWatch: makes a worker process exit as soon as its parent dies.
//
// A background thread polls a pidfd of the parent (no timer, no busy loop) and
// calls _exit(exit_code) when it becomes readable.  PR_SET_PDEATHSIG is not
// used: it fires when the *thread* that forked exits, which would kill the
// workers of a loader iterated from a short-lived thread.  Call once, in the
// worker, after fork or at spawn start-up.  Fails if the parent is already
// gone (the caller should exit) or the kernel lacks pidfds (Linux < 5.3).
#ifndef STOKER_PROC_PARENT_WATCH_H_
#define STOKER_PROC_PARENT_WATCH_H_

#include <sys/types.h>

#include "stoker/status.h"

namespace stoker {

// `expected_parent` is the loader's main process (with forkserver it is not
// the OS parent).  Returns Closed if it is already gone.
Status StartParentWatch(pid_t expected_parent, int exit_code);

}  // namespace stoker

#endif  // STOKER_PROC_PARENT_WATCH_H_
