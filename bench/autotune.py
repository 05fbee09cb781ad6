"""The autotuner (num_workers="auto", prefetch_factor="auto") against the
best hand-picked setting of a grid, on 2 cores, in the same run.

    python bench/autotune.py [--workloads gil,jpeg,remote,big,shift,a,b,c] [--grid quick|full]
                             [--seconds 2.5] [--rounds 2] [--peers]

Workloads (bench/autotune_workloads.py): a GIL-bound Python transform
(batch 32), the native JPEG pipeline (stoker.vision, train transforms, 2,000
images of 500x375, batch 32, persistent workers), a slow remote store (an HTTP GET per sample,
20 ms each, batch 8), 8 MiB samples under max_memory=256 MiB (batch 4).

1. The grid: stoker.DataLoader with num_workers x prefetch_factor (quick:
   {0,1,2,3,4,6,8} x {1,2,4,8}; full: 0-8 x 1-8), each warmed up 1 s then
   measured `--seconds`; for `big`, a setting whose process tree grew past
   the budget (PSS sampled at 20 Hz) is out of the grid ("over").
2. Rounds, alternating: the grid's best setting again (1 s warm-up) and the
   autotuner (8 s to settle, then measured 2 x `--seconds`): the ratio of
   their median rates is the figure (the grid's best alone is the maximum
   of many noisy runs: measured again beside the autotuner, it is fair).
   torch's DataLoader with the same best setting is measured once beside.
   For the autotuner: where it settled, the process tree's runnable threads
   on average (schedstat: running or waiting for a core) and its peak PSS.
3. shift: the training loop takes 5 ms a step, each sample sleeps 0.5 ms,
   then 2 ms (4x) after 10 s; the best fixed setting for the second cost is
   measured, and the autotuner's time from the change until its rate over
   the last second is 0.9x that best.
4. a, b, c: `stoker bench`'s workloads (tiny samples in batches of 64
   and of 1, 4 MiB samples in batches of 8), stoker with the bench's 2
   workers and stoker's own prefetch, against "auto" (both knobs), and
   torch's DataLoader with 2 workers.
5. --peers (where installed): tf.data with AUTOTUNE (num_parallel_calls and
   prefetch, ram_budget for `big`) and Grain with pick_performance_config
   on the Python workloads.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import autotune_workloads as W  # noqa: E402

import stoker  # noqa: E402
from stoker import _autotune  # noqa: E402
from stoker._procfs import children, pss_bytes, runnable_seconds, tree_pids  # noqa: E402

BATCH = {"gil": 32, "jpeg": 32, "remote": 8, "big": 4, "shift": 16}
BIG_BUDGET = 256 << 20
SETTLE_S = 8.0


class Cycle:
    """Batches from a loader's epochs, one after another."""

    def __init__(self, loader):
        self.loader, self.it = loader, iter(loader)

    def next(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)

    def close(self):
        shut = getattr(self.it, "_shutdown_workers", None)
        if shut is not None:
            shut()
        self.it = None
        gc.collect()


class Watch:
    """The process tree's PSS at 20 Hz (its growth over `base`), but for `skip`."""

    def __init__(self, skip=()):
        self.skip, self.peak, self._stop = set(skip), 0, threading.Event()
        deadline = time.monotonic() + 10  # (an earlier loader's workers, leaving: they share this one's pages)
        while any(p not in self.skip for p in children()) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.base = pss_bytes(os.getpid())
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.05):
            total = sum(pss_bytes(p) for p in tree_pids() if p not in self.skip)
            self.peak = max(self.peak, total - self.base)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.peak


def runnable_s(skip) -> float:
    return runnable_seconds([p for p in tree_pids() if p not in skip])


def measure(make, warm_s: float, seconds: float, skip=(), step_s: float = 0.0) -> dict:
    loader = make()
    watch = Watch(skip)
    cyc = Cycle(loader)
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < warm_s:
            cyc.next()
            if step_s:
                time.sleep(step_s)
        r0, t1, n = runnable_s(skip), time.perf_counter(), 0
        while time.perf_counter() - t1 < seconds:
            cyc.next()
            n += 1
            if step_s:
                time.sleep(step_s)
        dt = time.perf_counter() - t1
        out = {"rate": n / dt, "runnable": (runnable_s(skip) - r0) / dt}
        st = loader.stats(False) if hasattr(loader, "stats") else {}
        if "autotune" in st:
            out["settled"] = {k: st["autotune"][k] for k in ("num_workers", "prefetch_factor")}
            out["decisions"] = st["autotune"]["decisions_total"]
    finally:
        cyc.close()
        out_peak = watch.stop()
    out["peak_pss"] = out_peak
    return out


def workload(name: str, port: int | None, root: str | None):
    """(dataset, extra DataLoader kwargs, native?)"""
    if name == "gil":
        return W.GilBound(), {}, False
    if name == "remote":
        return W.Remote(port), {}, False
    if name == "big":
        return W.Big(), {"max_memory": BIG_BUDGET}, False
    if name == "jpeg":
        from stoker.bench.images import make_images, vision_folder
        return vision_folder(make_images(root, 2000), train=True), {"shuffle": True, "persistent_workers": True}, True
    raise ValueError(name)


def grid(quick: bool, native: bool):
    nws = [0, 1, 2, 3, 4, 6, 8] if quick else list(range(9))
    pfs = [1, 2, 4, 8] if quick else list(range(1, 9))
    out = []
    for nw in nws:
        if nw == 0:
            if not native:
                out.append((0, None))
            continue
        out += [(nw, pf) for pf in pfs]
    return out


def stoker_loader(ds, kw, name, nw, pf):
    return lambda: stoker.DataLoader(ds, batch_size=BATCH[name], num_workers=nw, prefetch_factor=pf, **kw)


def run_workload(name, a, port, root, skip, report):
    ds, kw, native = workload(name, port, root)
    rows = {}
    for nw, pf in grid(a.grid == "quick", native):
        r = measure(stoker_loader(ds, kw, name, nw, pf), 1.0, a.seconds, skip)
        over = name == "big" and r["peak_pss"] > BIG_BUDGET
        rows[(nw, pf)] = r["rate"] if not over else None
        print(f"  {name} nw={nw} pf={pf}: {r['rate']:.1f} batches/s, peak {r['peak_pss'] >> 20} MiB"
              f"{' (over the budget)' if over else ''}", flush=True)
    best = max((k for k in rows if rows[k] is not None), key=lambda k: rows[k])
    pairs = []
    for _ in range(a.rounds):
        b = measure(stoker_loader(ds, kw, name, *best), 1.0, a.seconds, skip)
        u = measure(stoker_loader(ds, kw, name, "auto", "auto"), SETTLE_S, 2 * a.seconds, skip)
        pairs.append((b, u))
        print(f"  {name} best {best}: {b['rate']:.1f}, auto: {u['rate']:.1f} at {u.get('settled')} "
              f"({u['runnable']:.2f} runnable, peak {u['peak_pss'] >> 20} MiB)", flush=True)
    t = None
    if not native:
        t = measure(lambda: torch.utils.data.DataLoader(ds, batch_size=BATCH[name], num_workers=best[0],
                                                        prefetch_factor=best[1]), 1.0, a.seconds, skip)["rate"]
    best_rate = statistics.median(b["rate"] for b, _u in pairs)
    auto_rate = statistics.median(u["rate"] for _b, u in pairs)
    report[name] = {"grid_best": list(best), "grid_best_rate": round(best_rate, 2), "auto_rate": round(auto_rate, 2),
                    "auto_vs_best": round(auto_rate / best_rate, 3), "torch_at_best": round(t, 2) if t else None,
                    "auto_settled": [u.get("settled") for _b, u in pairs],
                    "auto_runnable": round(statistics.median(u["runnable"] for _b, u in pairs), 2),
                    "auto_peak_pss_mib": max(u["peak_pss"] for _b, u in pairs) >> 20,
                    "grid": {f"{k[0]}x{k[1]}": (round(v, 2) if v is not None else "over") for k, v in rows.items()}}
    if a.peers and name in ("gil", "remote", "big"):
        report[name]["peers"] = peers(ds, name, a, skip)


def bench_workload(key, a, report, skip):
    """`stoker bench`'s workload `key`: its 2 workers against "auto"."""
    from stoker.bench import WORKLOADS
    w = WORKLOADS[key]
    per = w.batch_size or 1
    rows = []
    for _ in range(a.rounds):
        fixed = measure(lambda: stoker.DataLoader(w.dataset(kind="stoker"), batch_size=w.batch_size, num_workers=2),
                        1.0, a.seconds, skip)
        auto = measure(lambda: stoker.DataLoader(w.dataset(kind="stoker"), batch_size=w.batch_size,
                                                 num_workers="auto", prefetch_factor="auto"),
                       SETTLE_S, 2 * a.seconds, skip)
        rows.append((fixed, auto))
        print(f"  {key}: 2 workers {fixed['rate'] * per:.0f} samples/s, auto {auto['rate'] * per:.0f} at "
              f"{auto.get('settled')}", flush=True)
    t = measure(lambda: torch.utils.data.DataLoader(w.dataset(kind="torch"), batch_size=w.batch_size,
                                                    num_workers=2), 1.0, a.seconds, skip)["rate"]
    fixed_rate = statistics.median(f["rate"] for f, _u in rows) * per
    auto_rate = statistics.median(u["rate"] for _f, u in rows) * per
    report[key] = {"what": w.title, "two_workers_samples_per_s": round(fixed_rate), "auto_samples_per_s": round(auto_rate),
                   "auto_vs_two_workers": round(auto_rate / fixed_rate, 3), "torch_two_workers": round(t * per),
                   "auto_vs_torch": round(auto_rate / (t * per), 2), "auto_settled": [u.get("settled") for _f, u in rows]}


def shift(a, report, skip):
    """The per-sample cost rises 4x mid-epoch: how long until the autotuner
    is back at 0.9x the best fixed setting for the new cost?"""
    step, c1, c2 = 0.005, 0.0005, 0.002
    ref = {}
    for nw, pf in [(6, 2), (8, 2), (8, 4)]:
        ds = W.Shift(c2)
        ref[(nw, pf)] = measure(lambda: stoker.DataLoader(ds, batch_size=BATCH["shift"], num_workers=nw,
                                                          prefetch_factor=pf), 1.0, a.seconds, skip, step)["rate"]
    best = max(ref.values())
    ds = W.Shift(c1)
    loader = stoker.DataLoader(ds, batch_size=BATCH["shift"], num_workers="auto", prefetch_factor="auto")
    cyc, times = Cycle(loader), []
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 10.0:
            cyc.next()
            time.sleep(step)
        before = loader.stats(False)["autotune"]["num_workers"]
        ds.set_cost(c2)
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < 20.0:
            cyc.next()
            time.sleep(step)
            times.append(time.perf_counter() - t1)
        after = loader.stats(False)["autotune"]
    finally:
        cyc.close()
    back = None
    for i, t in enumerate(times):
        if t >= 1.0 and sum(1 for x in times[:i + 1] if x > t - 1.0) >= 0.9 * best:
            back = t
            break
    report["shift"] = {"best_fixed_after": round(best, 2), "reference": {f"{k[0]}x{k[1]}": round(v, 2)
                                                                          for k, v in ref.items()},
                       "workers_before": before, "workers_after": after["num_workers"],
                       "back_at_0.9x_after_s": round(back, 2) if back is not None else None,
                       "last_5s_rate": round(sum(1 for x in times if x > times[-1] - 5) / 5, 2)}
    print(f"  shift: best fixed {best:.1f}/s; auto {before} -> {after['num_workers']} workers, back at 0.9x after "
          f"{back} s", flush=True)


def peers(ds, name, a, skip) -> dict:
    out = {}
    try:
        import tensorflow as tf
    except ImportError:
        tf = None
    if tf is not None:
        def make_tf():
            d = tf.data.Dataset.range(10 ** 7).map(
                lambda i: tf.numpy_function(lambda j: ds[int(j)], [i], tf.uint8 if name != "big" else tf.float32),
                num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH[name]).prefetch(tf.data.AUTOTUNE)
            if name == "big":
                opts = tf.data.Options()
                opts.autotune.ram_budget = BIG_BUDGET
                d = d.with_options(opts)
            return _Iterable(d)
        r = measure(make_tf, SETTLE_S, 2 * a.seconds, skip)
        out["tf.data AUTOTUNE"] = {"rate": round(r["rate"], 2), "runnable": round(r["runnable"], 2),
                                   "peak_pss_mib": r["peak_pss"] >> 20}
    try:
        import grain.python as gp
        from grain.experimental import pick_performance_config
    except ImportError:
        gp = None
    if gp is not None:
        def make_grain():
            src = gp.MapDataset.source(ds).batch(BATCH[name]).to_iter_dataset()
            cfg = pick_performance_config(src, ram_budget_mb=(BIG_BUDGET >> 20) if name == "big" else 1024,
                                          max_workers=8, max_buffer_size=None)
            out.setdefault("grain_config", str(cfg.multiprocessing_options))
            return _Iterable(src.mp_prefetch(cfg.multiprocessing_options))
        r = measure(make_grain, SETTLE_S, 2 * a.seconds, skip)
        out["Grain pick_performance_config"] = {"rate": round(r["rate"], 2), "runnable": round(r["runnable"], 2),
                                                "peak_pss_mib": r["peak_pss"] >> 20}
    print(f"  {name} peers: {out}", flush=True)
    return out


class _Iterable:
    def __init__(self, ds):
        self.ds = ds

    def __iter__(self):
        return iter(self.ds)


def main():
    warnings.filterwarnings("ignore", category=UserWarning)
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="gil,jpeg,remote,big,shift,a,b,c")
    ap.add_argument("--grid", choices=("quick", "full"), default="quick")
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "stoker-bench-images"))
    a = ap.parse_args()
    names = a.workloads.split(",")
    report = {"cores": _autotune.cores()}
    server, port = None, None
    with tempfile.TemporaryDirectory() as tmp:
        if "remote" in names:
            pf = os.path.join(tmp, "port")
            server = subprocess.Popen([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                       "import autotune_workloads as W; W.serve(sys.argv[2])",
                                       os.path.dirname(os.path.abspath(__file__)), pf], stdin=subprocess.PIPE)
            while not os.path.exists(pf):
                time.sleep(0.05)
            port = int(open(pf).read())
        skip = {server.pid} if server else set()
        try:
            for name in names:
                if name == "shift":
                    shift(a, report, skip)
                elif name in ("a", "b", "c"):
                    bench_workload(name, a, report, skip)
                else:
                    run_workload(name, a, port, a.root, skip, report)
        finally:
            if server is not None:
                server.stdin.close()
                server.kill()
                server.wait()
    print("\n| workload | grid best (nw x pf) | its rate | auto | auto / best | auto settled | runnable | "
          "torch at best |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        r = report.get(name)
        if name in ("shift", "a", "b", "c") or r is None:
            continue
        print(f"| {name} | {r['grid_best'][0]} x {r['grid_best'][1]} | {r['grid_best_rate']} | {r['auto_rate']} | "
              f"{r['auto_vs_best']}x | {r['auto_settled'][-1]} | {r['auto_runnable']} | {r['torch_at_best']} |")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
