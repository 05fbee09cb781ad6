"""Peak memory of a process tree, sampled in the background.

Memory is the sum of PSS (proportional set size) over the main process and
all its descendants, read from /proc/PID/smaps_rollup: shared memory is
counted once across the tree, not once per process as RSS would."""
from __future__ import annotations

import os
import threading


def _children(pid: int):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree_pids(root: int):
    pids, todo = [], [root]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += _children(p)
    return pids


def pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_pss(root: int | None = None) -> int:
    return sum(pss_bytes(p) for p in tree_pids(root or os.getpid()))


class PeakSampler:
    """Samples tree_pss() every `interval` seconds until stopped."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.peak = tree_pss()
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, tree_pss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_pss())
