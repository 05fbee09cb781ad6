"""Reaps worker processes after a loader shuts down, off the caller's path.

Shutting a loader down wakes its workers (they leave on their own within
milliseconds) and hands them here: a background thread waits for them, kills
any still busy in user code after a short grace, and joins them.  `del
iterator` therefore returns at once, and the workers are gone within the grace
plus the kernel's process teardown.  At interpreter exit everything pending is
reaped synchronously, so no process outlives the program.
"""
from __future__ import annotations

import atexit
import os
import sys
import multiprocessing.connection as mp_connection
import threading
import time
import weakref

_lock = threading.Lock()
_pending: list = []          # [(deadline, process)]
_wake = threading.Event()
_thread = None
_owner = os.getpid()  # a forked child inherits this module's state, not the thread


def _reap(entries, block_until_done: bool):
    """Waits for `entries` until their deadlines, kills the rest, joins all."""
    waiting = {p.sentinel: (d, p) for d, p in entries}
    while waiting:
        now = time.monotonic()
        late = [s for s, (d, _p) in waiting.items() if d <= now]
        for s in late:
            waiting[s][1].kill()
            waiting.pop(s)[1].join()
        if not waiting:
            break
        timeout = min(d for d, _p in waiting.values()) - now
        if not block_until_done:
            timeout = min(timeout, 0.05)
        for s in mp_connection.wait(list(waiting), timeout=max(timeout, 0)):
            waiting.pop(s)[1].join()
        if not block_until_done and _wake.is_set():
            break
    return [(d, p) for d, p in waiting.values()]


def _run():
    leftover = []
    while True:
        _wake.wait(None if not leftover else 0.01)
        with _lock:
            _wake.clear()
            batch = leftover + _pending[:]
            _pending.clear()
        try:
            leftover = _reap(batch, block_until_done=False)
        except Exception as e:  # never die: later loaders depend on this thread
            sys.stderr.write(f"stoker: reaper: {e!r}\n")
            leftover = [(d, p) for d, p in batch if p.exitcode is None]
        del batch


# Two threads that wait for one child race: the first waitpid() reaps it, the
# second gets ECHILD, and multiprocessing's poll() then answers None ("still
# running") until the first thread stores the exit code.  A training loop's
# own join() of a worker (torch's tests do this) could see a dead worker as
# alive that way, beside this module's thread.  guard() makes every poll of
# a worker's Popen take this lock, around the waitpid and the store both.
_poll_lock = threading.RLock()


def guard(process):
    """Called right after process.start(): serializes the waits for it.

    The replacement poll holds its Popen weakly: a strong reference would be
    a cycle (popen.poll -> poll -> popen) that keeps the Popen, and so its
    sentinel pipe, open until the cyclic garbage collector runs; this way
    they are closed as soon as the worker is joined and dropped."""
    popen_ref = weakref.ref(process._popen)
    plain_poll = type(process._popen).poll

    def poll(flag=os.WNOHANG):
        popen = popen_ref()
        if popen is None:  # (cannot be called then: it is the Popen's own attribute)
            return None
        if flag != os.WNOHANG and popen.returncode is None:
            # A blocking wait: first for the exit, outside the lock (the rest,
            # the kernel's teardown after the sentinel fires, is short).
            mp_connection.wait([popen.sentinel])
        with _poll_lock:
            return plain_poll(popen, flag)

    process._popen.poll = poll


def reap(processes, grace_s: float):
    """Schedules `processes` (already told to exit) to be joined, killing any
    still alive after `grace_s` seconds."""
    global _thread, _owner
    deadline = time.monotonic() + grace_s
    procs = [p for p in processes if p is not None and p.pid is not None]
    if not procs:
        return  # native reader threads, or nothing started: no thread needed
    if sys.is_finalizing():
        # No new thread can start now (start() would wait forever): join here.
        _reap([(deadline, p) for p in procs], block_until_done=True)
        return
    with _lock:
        if _owner != os.getpid():  # forked since: start afresh in this process
            _pending.clear()
            _thread, _owner = None, os.getpid()
        _pending.extend((deadline, p) for p in procs)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="stoker-reaper", daemon=True)
            _thread.start()
    _wake.set()


@atexit.register
def _reap_all_at_exit():
    if _owner != os.getpid():
        return  # a forked child: these processes are its parent's
    with _lock:
        batch = _pending[:]
        _pending.clear()
    _reap(batch, block_until_done=True)
