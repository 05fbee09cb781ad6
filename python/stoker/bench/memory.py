"""Peak memory of a process tree, sampled in the background.

Memory is the sum of PSS (proportional set size) over the main process and
all its descendants, read from /proc/PID/smaps_rollup: shared memory is
counted once across the tree, not once per process as RSS would."""
from __future__ import annotations

import os
import threading

from stoker._procfs import pss_bytes, tree_pids


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
