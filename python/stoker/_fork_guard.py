"""Forking a worker again when the child never came out of Python's fork handling.

CPython 3.11 and older re-create the lock over the interpreter's list of
threads in a forked child only after they have used it there
(python/cpython#112275, fixed in 3.12).  A process forked while another
thread of the parent held that lock waits forever inside os.fork(), before
any code of the worker runs.  The threads that take it without the GIL are
native threads entering Python for the first time (PyGILState_Ensure):
torch's gloo threads running a Python callback, for one; a training job
under torchrun or accelerate has them.  The loader would then wait for that
worker's batches for as long as `timeout` allows, or forever.

So each forked worker says it is out from an at-fork hook, which runs once
the interpreter's own fork handling is done (microseconds after the fork;
the worker's imports and worker_init_fn come later and are not timed).  A
child that has not said so within the first limit is killed, with a warning
that says why, and forked again, with longer limits after it; after the last,
the loader raises.
"""
from __future__ import annotations

import logging
import os
import select
import sys
import time
from typing import Callable, Optional, Tuple

logger = logging.getLogger("stoker")

# Seconds each fork may take to come out of the interpreter's fork handling.
LIMITS_S = (5.0, 10.0, 20.0)

# The pipe of the fork in progress (read end, write end), set in the parent
# around one Process.start(); a forked child writes its pid to it.
_pipe: Optional[Tuple[int, int]] = None


def _after_in_child() -> None:
    global _pipe
    pipe, _pipe = _pipe, None
    if pipe is None:
        return
    r, w = pipe
    os.close(r)
    try:
        os.write(w, str(os.getpid()).encode())
    except OSError:
        pass
    os.close(w)


os.register_at_fork(after_in_child=_after_in_child)


def _came_out(r: int, pid: int, limit_s: float) -> bool:
    """Whether the child `pid` wrote to the pipe within limit_s (its end
    closed unwritten, as by a child that died at once, counts as out: the
    loader's watch of worker deaths reports it)."""
    deadline = time.monotonic() + limit_s
    got = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            return False
        chunk = os.read(r, 32)
        if not chunk:
            return True
        got += chunk
        if got == str(pid).encode():
            return True


def start(make: Callable[[], "object"], what: str, forked: bool):
    """Starts the process `make()` returns (a multiprocessing Process) and
    returns it; forked, once its child is out of the fork.  `what` names it
    in the warning and the error."""
    global _pipe
    limits_s = LIMITS_S
    if not forked:  # (spawn, forkserver: started from a fresh interpreter)
        proc = make()
        proc.start()
        return proc
    for attempt, limit in enumerate(limits_s):
        proc = make()
        r, w = os.pipe2(os.O_CLOEXEC)
        _pipe = (r, w)
        try:
            proc.start()
        except BaseException:
            os.close(r)
            raise
        finally:
            _pipe = None
            os.close(w)
        try:
            out = _came_out(r, proc.pid, limit)
        finally:
            os.close(r)
        if out:
            return proc
        proc.kill()
        proc.join(5.0)
        logger.warning(
            "stoker: %s (pid %d) was still inside os.fork() after %g s: Python %s deadlocks a child forked while "
            "another thread held the interpreter's thread-list lock (python/cpython#112275, fixed in Python 3.12). "
            "Killed it%s", what, proc.pid, limit, ".".join(map(str, sys.version_info[:3])),
            f"; forking it again ({attempt + 2} of {len(limits_s)})" if attempt + 1 < len(limits_s) else "")
    raise RuntimeError(
        f"stoker: {what} was forked {len(limits_s)} times and never came out of os.fork() "
        f"(python/cpython#112275, fixed in Python 3.12). Use Python 3.12 or newer, or "
        f"multiprocessing_context='forkserver' (workers started from a process with no other threads).")
