"""progress=True: a live line with throughput, stall and memory; and the
iterator's throughput figures (Throughput) that stats() and the line show.

Uses tqdm where it is installed (a bar with the numbers as its postfix);
otherwise rewrites one line on stderr.  Numbers are refreshed at most every
half second, so the display costs nothing per batch."""
from __future__ import annotations

import sys
import threading
import time

from stoker import _verdict

_MIB = 1 << 20


def describe(st: dict) -> str:
    t = st["throughput"]
    text = (f"{t['batches_per_s']:.1f} batch/s, {t['bytes_per_s'] / 1e6:.0f} MB/s, "
            f"stall {100 * t['stall_fraction']:.0f}%, shm {st['arena_bytes'] / _MIB:.0f}/"
            f"{st['max_memory'] / _MIB:.0f} MiB")
    if "tree_pss" in st:
        text += f", PSS {st['tree_pss'] / _MIB:.0f} MiB"
    b = st.get("bottleneck") or {}
    if b.get("stage"):
        share = b["wait_by_stage"].get(b["stage"])
        text += f", bound: {b['stage']}" + (f" {100 * share:.0f}%" if share and b["stage"] != _verdict.LOOP else "")
    return text


def summary(st: dict) -> str:
    """The epoch's last lines (its end, or the loop leaving it): throughput
    and the verdict with its advice."""
    b = st.get("bottleneck") or {}
    text = "stoker: this epoch: " + describe(st)
    if b.get("stage"):
        parts = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(b["wait_by_stage"].items(), key=lambda kv: -kv[1]))
        text += f"\n  bottleneck: {b['stage']}" + (f" (the loop's wait: {parts})" if parts else "") + \
            f"\n  {b['advice']}"
    return text


_BARS = {}  # tqdm class -> its subclass with a thread lock


def _bar_class():
    """tqdm, with a thread lock of its own: tqdm's default lock holds a
    multiprocessing lock, a POSIX semaphore mapped from /dev/shm, and this
    bar is only ever drawn from the training loop's process (stoker keeps
    /dev/shm out of the way: docs/memory.md).  None without tqdm."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    bar = _BARS.get(tqdm)
    if bar is None:
        bar = _BARS[tqdm] = type("StokerBar", (tqdm,), {})
        bar.set_lock(threading.RLock())
    return bar


class Progress:
    INTERVAL_S = 0.5

    def __init__(self, stats, total, desc: str = "stoker"):
        self._stats = stats  # a callable returning loader stats
        self._last = 0.0
        self._count = 0
        self._total = total
        self._desc = desc
        bar = _bar_class()
        self._bar = bar(total=total, unit="batch", desc=desc, dynamic_ncols=True) if bar is not None else None

    def update(self):
        self._count += 1
        if self._bar is not None:
            self._bar.update(1)
        now = time.monotonic()
        if now - self._last < self.INTERVAL_S:
            return
        self._last = now
        self.show(describe(self._stats()))

    def show(self, text: str):
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)
        else:
            of = f"/{self._total}" if self._total else ""
            sys.stderr.write(f"\r{self._desc}: {self._count}{of} batches, {text}\x1b[K")
            sys.stderr.flush()

    def close(self):
        try:
            final = summary(self._stats()) if self._count else None
        except Exception:  # noqa: BLE001 - a display must never fail the loop
            final = None
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._count:
            try:  # the last count: updates between refreshes are not drawn
                self.show(describe(self._stats()))
            except Exception:  # noqa: BLE001 - a display must never fail the loop
                pass
            sys.stderr.write("\n")
        if final:
            sys.stderr.write(final + "\n")
        sys.stderr.flush()
        self._count = 0


class Throughput:
    """Batches/s, bytes/s and the training loop's stall time (the time spent
    in __next__ waiting for a batch), per epoch; and the epoch's bottleneck
    verdict (stoker/_verdict.py) from the workers' stage clocks and the
    pump's wait for room (`no_room`: pump.no_room_wait_s, None without
    workers)."""

    def __init__(self, engine, no_room=None, native=None):
        self.now = time.perf_counter
        self._engine = engine
        self._no_room = no_room or (lambda: 0.0)
        self._native = native is not None
        # Over the iterator's life, epochs and their starts included (the
        # autotuner's windows: _autotune.py); the epoch's are what they grew
        # by since reset().
        self.total_batches, self.total_stall = 0, 0.0
        self.reset()

    @property
    def batches(self) -> int:
        return self.total_batches - self._batches0

    @property
    def stall(self) -> float:
        return self.total_stall - self._stall0

    def reset(self):
        self.start = self.now()
        self._batches0, self._stall0 = self.total_batches, self.total_stall
        self.first_wait = 0.0  # the epoch's first batch: workers starting, not a stage (the verdict leaves it out)
        self.after_first = self.start
        st = self._engine.stats(False)
        self.bytes0 = st["delivered_bytes"]
        self.base = _verdict.counters(st, self._no_room(), (0.0, 0.0, 0, 0.0))

    def verdict(self, st: dict) -> dict:
        """The verdict since the epoch began."""
        loop = (self.stall - self.first_wait, self.now() - self.after_first, max(0, self.batches - 1),
                self.first_wait)
        return _verdict.judge(_verdict.counters(st, self._no_room(), loop), self.base, st, self._native)

    def batch(self, t0):
        now = self.now()
        if self.total_batches == self._batches0:  # (the epoch's first)
            self.first_wait, self.after_first = now - t0, now
        self.total_batches += 1
        self.total_stall += now - t0

    def snapshot(self, delivered_bytes: int) -> dict:
        elapsed = max(self.now() - self.start, 1e-9)
        return {"batches": self.batches, "batches_per_s": self.batches / elapsed,
                "bytes_per_s": (delivered_bytes - self.bytes0) / elapsed,
                "stall_s": self.stall, "stall_fraction": min(1.0, self.stall / elapsed), "elapsed_s": elapsed}
