"""Shutdown and fault stress: create a loader, iterate a random number of
batches, then a random fault or a random stop, destroy it; again and again.

    python bench/stress_cycles.py --loader stoker --cycles 10000
    python bench/stress_cycles.py --loader torch  --cycles 10000

Each cycle draws: fork or spawn (spawn with --spawn-fraction), persistent
workers or not, pin_memory or not, 2 workers, and one ending:
  end (a whole epoch), break, del (mid-epoch), loop_exception (the training
  loop raises while the iterator is referenced), getitem_exception,
  worker_sigkill, timeout (a worker hangs; timeout=0.5).
It measures the shutdown latency (from the ending to the moment every worker
process is gone) and checks after every cycle that no worker process, no
arena fd and no /dev/shm or /tmp file is left.  A cycle that hangs for
--hang-s seconds aborts the run with every thread's stack.  Prints a JSON
summary on the last line.
"""
from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import multiprocessing
import os
import random
import signal
import statistics
import sys
import threading
import time
import warnings

import torch
from torch.utils.data import Dataset

from stoker._procfs import alive, children, stoker_files
from stoker._procfs import arena_fds as _arena_fds

ENDINGS = ["end", "break", "del", "loop_exception", "getitem_exception", "worker_sigkill", "timeout"]
WEIGHTS = [3, 3, 3, 2, 2, 2, 1]


class FaultyDataset(Dataset):
    def __init__(self, n, fail_at=None, hang_at=None):
        self.n, self.fail_at, self.hang_at = n, fail_at, hang_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"injected failure at {i}")
        if i == self.hang_at:
            time.sleep(3600)
        return torch.full((4,), float(i))


class TrainingLoopError(Exception):
    pass


def describe_process(pid):
    """State, parent, command line and kernel wait channel of every thread of `pid`."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError as e:
            return f"({e.strerror})"
    stat = read(f"/proc/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split()
    threads = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            threads[tid] = read(f"/proc/{pid}/task/{tid}/wchan")
    except OSError:
        pass
    return {"pid": pid, "state": fields[0] if fields else "?", "ppid": int(fields[1]) if len(fields) > 1 else None,
            "our_child": len(fields) > 1 and int(fields[1]) == os.getpid(),
            "cmdline": read(f"/proc/{pid}/cmdline").replace("\0", " ")[:200], "wchan": threads,
            "stack": read(f"/proc/{pid}/stack")[:1500]}


def arena_fds():
    return len(_arena_fds())


def shm_files():
    return set(stoker_files())


def run_cycle(rng, loader_cls, args, stats):
    spawn = rng.random() < args.spawn_fraction
    persistent = rng.random() < 0.5
    pin = rng.random() < 0.3
    ending = rng.choices(ENDINGS, WEIGHTS)[0]
    n = rng.randint(8, 200)
    bs = rng.choice([1, 4, 8])
    stop_at = rng.randint(0, max(0, n // bs - 1))
    fail_at = stop_at * bs if ending == "getitem_exception" else None
    hang_at = stop_at * bs if ending == "timeout" else None
    kw = dict(batch_size=bs, num_workers=2, persistent_workers=persistent, pin_memory=pin,
              timeout=0.5 if ending == "timeout" else 0)
    if spawn:
        kw["multiprocessing_context"] = multiprocessing.get_context("spawn")
    loader = loader_cls(FaultyDataset(n, fail_at, hang_at), **kw)
    stats["cycles"] += 1
    stats["last"] = dict(ending=ending, spawn=spawn, persistent=persistent, pin=pin, n=n, bs=bs, stop_at=stop_at)
    stats["endings"][ending] = stats["endings"].get(ending, 0) + 1
    stats["spawn"] += spawn
    pids = []
    t_end = None
    raised = None
    completed = [False]

    def body():
        nonlocal t_end, pids
        it = iter(loader)
        for k, _batch in enumerate(it):
            if not pids:
                pids = [w.pid for w in it._workers]
            if k == stop_at:
                if ending == "break":
                    t_end = time.perf_counter()
                    break
                if ending == "del":
                    t_end = time.perf_counter()
                    del it, _batch
                    return
                if ending == "loop_exception":
                    t_end = time.perf_counter()
                    raise TrainingLoopError("loss is nan")
                if ending == "worker_sigkill":
                    os.kill(rng.choice([w.pid for w in it._workers]), signal.SIGKILL)
        if not pids:
            pids = [w.pid for w in getattr(it, "_workers", [])]
        completed[0] = True
        t_end = t_end or time.perf_counter()

    try:
        body()
    except TrainingLoopError:
        pass
    except (ValueError, RuntimeError) as e:  # injected failure, crash or timeout, as raised by the loader
        t_end = time.perf_counter()
        raised = type(e).__name__
    if persistent:
        del loader  # persistent workers live as long as the loader
    # No gc.collect() here: workers must go when the last reference does.
    t_block = time.perf_counter()
    deadline = time.perf_counter() + 10
    while any(alive(p) for p in pids) and time.perf_counter() < deadline:
        time.sleep(0.0005)
    t_gone = time.perf_counter()
    if any(alive(p) for p in pids):
        stats["leaked_processes"] += 1
        # What the process left behind is doing, to tell a stuck worker from
        # a pid the kernel already gave to another process.
        stats["leaks"].append({"cycle": stats["cycles"], **stats["last"],
                               "processes": [describe_process(p) for p in pids if alive(p)]})
    expected_raise = {"getitem_exception", "worker_sigkill", "timeout"}
    # A worker killed after it finished its last batch of the epoch may go
    # unnoticed: the epoch is complete, nothing was lost.
    killed_after_last = ending == "worker_sigkill" and raised is None and completed[0]
    if (ending in expected_raise) != (raised is not None) and not killed_after_last:
        stats["unexpected"].append((ending, raised))
    if t_end is not None:
        stats["latency_ms"].append((t_gone - t_end) * 1e3)
        worst = stats["worst_by_ending"]
        worst[ending] = round(max(worst.get(ending, 0), (t_gone - t_end) * 1e3), 2)
    stats["after_block_ms"].append((t_gone - t_block) * 1e3)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--loader", choices=["torch", "stoker"], default="stoker")
    p.add_argument("--cycles", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spawn-fraction", type=float, default=0.05)
    p.add_argument("--hang-s", type=float, default=120)
    p.add_argument("--progress", type=int, default=0, help="print a progress line every N cycles")
    p.add_argument("--check-each-cycle", action="store_true", help="look for open arena fds after every cycle")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.loader == "torch":
        loader_cls = torch.utils.data.DataLoader
    else:
        import stoker
        loader_cls = stoker.DataLoader
    rng = random.Random(args.seed)
    stats = {"loader": args.loader, "cycles": 0, "spawn": 0, "endings": {}, "latency_ms": [],
             "after_block_ms": [], "leaked_processes": 0, "leaks": [], "unexpected": [], "worst_by_ending": {}}
    base_children = set(children())
    base_files = shm_files()
    t0 = time.perf_counter()
    for c in range(args.cycles):
        faulthandler.dump_traceback_later(args.hang_s, exit=True)
        run_cycle(rng, loader_cls, args, stats)
        faulthandler.cancel_dump_traceback_later()
        if args.check_each_cycle:
            gc.collect()
            if arena_fds():
                print(f"# cycle {c}: {arena_fds()} arena fd(s) open after {stats['last']}", file=sys.stderr,
                      flush=True)
        if args.progress and (c + 1) % args.progress == 0:
            print(f"# {c + 1} cycles, {time.perf_counter() - t0:.0f} s, leaked {stats['leaked_processes']}",
                  file=sys.stderr, flush=True)
    # Let any reaper finish, then check what remains.
    t_wait = time.perf_counter()
    while set(children()) - base_children and time.perf_counter() - t_wait < 5:
        time.sleep(0.01)
    gc.collect()
    lat = stats.pop("latency_ms")
    blk = stats.pop("after_block_ms")
    stats.update({
        "wall_s": round(time.perf_counter() - t0, 1),
        "shutdown_latency_ms_mean": round(statistics.mean(lat), 2) if lat else None,
        "shutdown_latency_ms_p99": round(sorted(lat)[int(0.99 * (len(lat) - 1))], 2) if lat else None,
        "shutdown_latency_ms_max": round(max(lat), 2) if lat else None,
        "left_processes": len(set(children()) - base_children),
        "left_arena_fds": arena_fds(),
        "left_files": sorted(shm_files() - base_files),
        "unexpected": stats["unexpected"][:10],
        "leaks": stats["leaks"][:10],
        "unexpected_count": len(stats["unexpected"]),
    })
    print(json.dumps(stats), flush=True)
    ok = (stats["leaked_processes"] == 0 and stats["left_processes"] == 0 and stats["left_arena_fds"] == 0
          and not stats["left_files"] and stats["unexpected_count"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
