"""Mid-epoch `del` of an iterator: how long it blocks the training loop, and
how long until every worker process is gone; torch's DataLoader and
stoker's in the same run, alternating, same dataset and arguments.

    python bench/shutdown_latency.py --cycles 100
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
from torch.utils.data import Dataset

from stoker._procfs import alive


class Tiny(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        return torch.full((16,), float(i))


def one(loader_cls):
    it = iter(loader_cls(Tiny(), batch_size=8, num_workers=2))
    for _ in range(5):
        next(it)
    pids = [w.pid for w in it._workers]
    t0 = time.perf_counter()
    del it
    t1 = time.perf_counter()
    while any(alive(p) for p in pids):
        time.sleep(0.0002)
    return (t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3


def summary(xs):
    xs = sorted(xs)
    return {"mean": round(statistics.mean(xs), 2), "p50": round(xs[len(xs) // 2], 2),
            "p99": round(xs[int(0.99 * (len(xs) - 1))], 2), "max": round(xs[-1], 2)}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--cycles", type=int, default=100)
    args = p.parse_args(argv)
    import stoker
    loaders = {"torch": torch.utils.data.DataLoader, "stoker": stoker.DataLoader}
    res = {k: {"blocked_ms": [], "gone_ms": []} for k in loaders}
    for _ in range(args.cycles):
        for name, cls in loaders.items():
            b, g = one(cls)
            res[name]["blocked_ms"].append(b)
            res[name]["gone_ms"].append(g)
    out = {name: {k: summary(v) for k, v in r.items()} for name, r in res.items()}
    out["cycles"] = args.cycles
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
