"""What torch's batch assignment costs: stoker with in_order=True (batch k on
worker k mod num_workers, reproducible) against in_order=False (any free
worker), and torch's DataLoader, on `stoker bench`'s workloads, rounds
alternating so the machine's noise falls on all three alike.

    python bench/in_order_cost.py --rounds 3 --seconds 3 [--workloads abc]
                                  [--prefetch-factors 8,32]

--prefetch-factors adds stoker in_order=True rows with those prefetch_factor
values (each worker's batches in flight: how far one worker may run ahead
of another that the kernel preempted).

Run it with PYTHONPATH pointing at another build's package to compare two
builds the same way (docs/benchmarks.md)."""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import stoker
from stoker.bench.workloads import WORKLOADS


def rate(make, seconds: float) -> float:
    it = iter(make())
    next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        b = next(it)
        n += len(b)
    rate = n / (time.perf_counter() - t0)
    del it, b
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--workloads", default="abc")
    ap.add_argument("--prefetch-factors", default="", help="comma-separated: more in_order=True rows")
    args = ap.parse_args()
    print(f"stoker {stoker.__file__}, torch {torch.__version__}")
    for key in args.workloads:
        w = WORKLOADS[key]
        kw = dict(batch_size=w.batch_size, num_workers=w.num_workers)
        loaders = {
            "torch": lambda: torch.utils.data.DataLoader(w.dataset(), **kw),
            "stoker in_order=True": lambda: stoker.DataLoader(w.dataset(), **kw),
            "stoker in_order=False": lambda: stoker.DataLoader(w.dataset(), in_order=False, **kw),
        }
        for pf in filter(None, args.prefetch_factors.split(",")):
            loaders[f"stoker prefetch_factor={int(pf)}"] = \
                lambda pf=int(pf): stoker.DataLoader(w.dataset(), prefetch_factor=pf, **kw)
        got = {name: [] for name in loaders}
        for r in range(args.rounds):
            names = list(loaders) if r % 2 == 0 else list(loaders)[::-1]
            for name in names:
                got[name].append(rate(loaders[name], args.seconds))
        t = statistics.median(got["torch"])
        print(f"({key}) {w.title}")
        for name, xs in got.items():
            m = statistics.median(xs)
            print(f"    {name:22s} {m:>12,.0f} samples/s  ({', '.join(f'{x:,.0f}' for x in xs)})"
                  + ("" if name == "torch" else f"  {m / t:6.1f}x torch"))


if __name__ == "__main__":
    main()
