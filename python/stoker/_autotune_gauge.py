"""What the autotuner (_autotune.py) sees of an iterator: readings of the
counters the loader already keeps, the window between two readings, and the
memory the loader holds and would hold at another setting (docs/autotune.md,
"What it does": the table of what each window measures)."""
from __future__ import annotations

import collections
import os
import time

from stoker import _native as N
from stoker._procfs import runnable_seconds

MEMORY_EVERY_S = 2.0
MEMORY_SHARE = 0.85  # of max_memory the model may plan: the rest is for what it does not see

Reading = collections.namedtuple("Reading", "t batches stall no_room busy store_wait runnable")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Gauge:
    """The readings of one iterator (a weak proxy: the iterator owns its
    tuner, which owns this)."""

    def __init__(self, it):
        self._it = it
        self._own = {}  # worker pid -> (when read, its own memory: _worker_memory)
        self._pool_bytes = 0  # the slot pool's resident bytes at the last read

    def _pids(self):  # (C++ reader threads are this process's)
        return [os.getpid()] + [w.pid for w in self._it._workers if w is not None and w.pid]

    def read(self) -> Reading:
        it = self._it
        # Regions of idle slots past what the batches in flight and held use
        # (after prefetch or workers came down) give their pages back, so
        # that the pool's resident bytes read here are what it needs.
        it._engine.trim_idle(it._pump.prefetch + 2)
        st = it._engine.stats(False)
        self._pool_bytes = st["arena_bytes"]  # (resident: memory)
        return Reading(time.monotonic(), it._stats.total_batches, it._stats.total_stall, it._pump.no_room_wait_s(),
                       [w["busy_s"] for w in st["workers"]],
                       [w["stage_s"].get("wait_store", 0.0) for w in st["workers"]], runnable_seconds(self._pids()))

    @staticmethod
    def measure(a: Reading, b: Reading, n: int, tuned_workers: bool) -> dict:
        """The window from reading a to reading b, with n workers active
        (the first n, where their count is tuned)."""
        dt = max(b.t - a.t, 1e-9)
        batches = b.batches - a.batches
        busy = [max(0.0, y - x) for x, y in zip(a.busy, b.busy)]
        store = [max(0.0, y - x) for x, y in zip(a.store_wait, b.store_wait)]
        active = busy[:n] if tuned_workers else busy
        waited = store[:len(active)]
        runnable = max(0.0, b.runnable - a.runnable) / dt
        core_share = min(1.0, cores() / runnable) if runnable > 0 else 1.0  # (of a busy second, on a core)
        return {"window_s": round(dt, 3), "batches_per_s": round(batches / dt, 2),
                "stall": round(min(1.0, (b.stall - a.stall) / dt), 3),
                "memory_wait": round(min(1.0, max(0.0, b.no_room - a.no_room) / dt), 3),
                "busy": round(sum(active) / dt / max(1, len(active)), 3),
                "store_wait": round(min(1.0, sum(waited) / sum(active)) if sum(active) > 0 else 0.0, 3),
                "runnable": round(runnable, 2),
                "cost_s": sum(busy) * core_share / batches if batches else 0.0}

    def memory(self, n: int, depth: int, cur_n: int, cur_depth: int, tuned_workers: bool) -> tuple:
        """(bytes the loader would hold with n workers at depth, now at
        cur_n x cur_depth; the bytes it may plan: MEMORY_SHARE of
        max_memory, the rest for what this does not see: a worker's peak
        between two reads, the main process's batch objects).  What it holds
        now, measured (the slot pool's resident bytes, at least the batches
        in flight and one held; each active worker's own memory), and what
        the change adds: batches in flight more, and for each worker more
        the largest worker's own memory and the samples of a batch it
        builds."""
        it = self._it
        batch = it._engine.expected_batch_bytes
        pool = max(self._pool_bytes, (cur_depth * cur_n + 1) * batch) + max(0, depth * n - cur_depth * cur_n) * batch
        if not tuned_workers or it._native_ds is not None:  # (reader threads: the process's own memory)
            return pool, int(MEMORY_SHARE * it._max_memory)
        own = self._worker_memory(cur_n)
        largest = max(own, default=0)
        return pool + sum(own) + max(0, n - len(own)) * (largest + batch), int(MEMORY_SHARE * it._max_memory)

    def _worker_memory(self, n: int) -> list:
        """Each of the n active workers' own memory: its private pages (not
        those it still shares with the process it was forked from) outside
        the slot pool (the batches it writes there are the pool's, counted
        once), each worker read again at most every MEMORY_EVERY_S, one read
        per call (a worker forked from a process that maps much memory takes
        milliseconds to read: the loop's thread pays for it); a worker not
        read yet counts as the largest."""
        live = {w.pid for w in self._it._workers[:n] if w is not None and w.pid}
        for pid in list(self._own):
            if pid not in live:
                del self._own[pid]
        now = time.monotonic()
        stale = [p for p in live if now - self._own.get(p, (-1e9, 0))[0] >= MEMORY_EVERY_S]
        if stale:
            pid = min(stale, key=lambda p: self._own.get(p, (-1e9, 0))[0])
            try:
                self._own[pid] = (now, N.lib.private_bytes_outside(pid, "stoker-arena"))
            except Exception:  # noqa: BLE001 - a worker that just left
                pass
        known = [u for _t, u in self._own.values()]
        return known + [max(known, default=0)] * (len(live) - len(known))
