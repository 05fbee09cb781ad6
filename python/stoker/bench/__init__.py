"""`stoker bench`: the same workloads through torch.utils.data.DataLoader and
stoker.DataLoader in one run, side by side.

Each run iterates one loader for a fixed time budget after its first batch
and reports samples/s, GB/s, time to first batch and the peak PSS of the
process tree.  The machine is shared and noisy: compare ratios measured in
the same run, not absolute numbers across runs.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import torch

from stoker.bench.memory import PeakSampler
from stoker.bench.workloads import WORKLOADS, Workload


def spin_rate(seconds: float, work=None) -> float:
    """Loop iterations per second of a Python thread over `seconds`, while
    this thread calls `work()` again and again (or sleeps): how much a
    loader leaves the GIL and the CPU to the rest of the program."""
    import threading
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if work is None:
            time.sleep(0.01)
        else:
            work()
    stop.set()
    t.join()
    return count[0] / (time.perf_counter() - t0)


def memcpy_bandwidth(nbytes: int = 256 << 20, repeats: int = 5) -> float:
    """Single-core memcpy bandwidth in bytes/s (numpy.copyto of a large buffer)."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return nbytes / best


def make_loader(kind: str, w: Workload):
    # (images: shuffled and repeated, as a training epoch reads them)
    args = dict(batch_size=w.batch_size, num_workers=w.num_workers, shuffle=w.key == "i")
    if kind == "torch":
        return torch.utils.data.DataLoader(w.dataset(kind=kind), **args)
    import stoker
    return stoker.DataLoader(w.dataset(kind=kind), **args)


def _batch_len(batch) -> int:
    return len(batch[1]) if isinstance(batch, (list, tuple)) else batch.shape[0]


def run_one(kind: str, w: Workload, seconds: float, progress=None) -> dict:
    loader = make_loader(kind, w)
    sample_bytes = loader.dataset.sample_bytes
    with PeakSampler(0.05) as mem:
        t0 = time.perf_counter()
        it = iter(loader)
        batch = next(it)
        first = time.perf_counter() - t0
        samples = 0
        start = time.perf_counter()
        deadline = start + seconds
        next_tick = start
        while True:
            try:
                batch = next(it)
            except StopIteration:  # a finite dataset (images): the next epoch
                it = iter(loader)
                continue
            samples += _batch_len(batch)
            del batch
            if samples % 256 == 0 or w.batch_size >= 64:
                now = time.perf_counter()
                if now >= deadline:
                    break
                if progress and now >= next_tick:
                    progress((now - start) / seconds)
                    next_tick = now + 0.2
        elapsed = time.perf_counter() - start
        del it
    rate = samples / elapsed
    return {"workload": w.key, "loader": kind, "samples_per_s": rate, "gb_per_s": rate * sample_bytes / 1e9,
            "time_to_first_batch_s": first, "peak_tree_pss_mib": mem.peak / 2**20, "samples": samples,
            "seconds": elapsed}


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled
        self.label = ""

    def start(self, label):
        self.label = label
        self(0.0)

    def __call__(self, frac):
        if not self.enabled:
            return
        pos = (self.done + min(frac, 1.0)) / self.total
        bar = "#" * int(pos * 30)
        sys.stderr.write(f"\r[{bar:<30}] {pos * 100:5.1f}%  {self.label:<40}")
        sys.stderr.flush()

    def step(self):
        self.done += 1
        self(0.0)

    def close(self):
        if self.enabled:
            sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()


def run(workloads="abci", seconds: float = 3.0, as_json: bool = False, progress: bool = True) -> list:
    keys = [k for k in workloads if k in WORKLOADS]
    if "i" in keys:
        import importlib.util
        if importlib.util.find_spec("PIL") is None:  # the image workload's torch baseline decodes with PIL
            print("stoker bench: workload i (images) needs Pillow (pip install pillow); left out", file=sys.stderr)
            keys.remove("i")
    bar = _Progress(2 * len(keys) + 1, progress and sys.stderr.isatty())
    bar.start("memcpy bandwidth")
    bw = memcpy_bandwidth()
    bar.step()
    rows = []
    for k in keys:
        w = WORKLOADS[k]
        for kind in ("torch", "stoker"):
            bar.start(f"{kind} {k}: {w.title}")
            rows.append(run_one(kind, w, seconds, bar))
            bar.step()
    bar.close()
    result = {"memcpy_gb_per_s": bw / 1e9, "rows": rows, "torch_version": torch.__version__,
              "cpus": os.cpu_count()}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    return result


def format_table(result: dict) -> str:
    rows = result["rows"]
    lines = [f"stoker bench  (torch {result['torch_version']}, {result['cpus']} CPUs, "
             f"single-core memcpy {result['memcpy_gb_per_s']:.2f} GB/s)", ""]
    head = f"{'workload':<48} {'loader':<7} {'samples/s':>12} {'GB/s':>7} {'first batch':>12} {'peak PSS':>10} {'ratio':>7}"
    lines += [head, "-" * len(head)]
    by = {(r["workload"], r["loader"]): r for r in rows}
    for key in dict.fromkeys(r["workload"] for r in rows):
        t, s = by.get((key, "torch")), by.get((key, "stoker"))
        for r in (t, s):
            if r is None:
                continue
            ratio = f"{r['samples_per_s'] / t['samples_per_s']:.1f}x" if (t and r is s) else ""
            lines.append(f"{'(' + key + ') ' + WORKLOADS[key].title:<48} {r['loader']:<7} {r['samples_per_s']:>12,.0f} "
                         f"{r['gb_per_s']:>7.2f} {r['time_to_first_batch_s'] * 1e3:>10.0f}ms "
                         f"{r['peak_tree_pss_mib']:>8.0f}MiB {ratio:>7}")
    if by.get(("c", "stoker")):
        frac = by[("c", "stoker")]["gb_per_s"] / result["memcpy_gb_per_s"]
        lines += ["", f"(c) stoker reaches {frac:.2f} of single-core memcpy bandwidth"]
    return "\n".join(lines)
