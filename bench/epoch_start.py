"""How soon a new loader's first batch comes, and a short epoch, against torch.

    python bench/epoch_start.py --records 256 --rounds 7

A raw file of --records 1 MiB float32 records (in the page cache), batch 8,
shuffled, 2 readers: stoker.DataLoader(stoker.io.RawDataset(...),
num_workers=2) (C++ reader threads) and torch.utils.data.DataLoader over a
dataset reading each record with np.fromfile (2 worker processes).  Each
round makes a new loader per side, alternating which goes first, and times
iter() to the first batch and iter() to the end of the epoch; the medians of
--rounds are printed, and a JSON line last.  Every new stoker iterator backs
its slot pool's regions anew (shm/arena.h), so this is where that cost shows.
Then the later epochs of one loader per side, persistent_workers False and
True, --rounds epochs each after a first one (stoker's two alternating, then
torch's two): the median epoch and the page faults (minor, this process and
its children that ended) per epoch.  A non-persistent stoker iterator makes
a new pool each epoch, a persistent one keeps its pool and reader threads;
torch restarts or keeps its worker processes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time

import numpy as np
import torch

import stoker
from native_read import NumpyRaw  # (bench/ is on the path when this file runs)
from stoker import io

RECORD = 1 << 18  # float32 elements: 1 MiB


def timed_epoch(loader):
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    for _ in it:
        pass
    return first, time.perf_counter() - t0


def minor_faults():
    return sum(resource.getrusage(who).ru_minflt for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def later_epochs(path, records, rounds, kw):
    """{loader name: (median epoch seconds, median minor faults per epoch)}
    over `rounds` epochs of one loader each, after its first epoch.  stoker's
    two loaders go first, alternating, then torch's two: a fork (torch's
    workers) write-protects this process's pages, and the next epoch of a
    stoker loader made before it would fault on every page of its pool."""
    got = {}
    for side in ("stoker", "torch"):
        loaders = {}
        for persistent in (False, True):
            name = f"{side}, {'persistent' if persistent else 'not persistent'}"
            loaders[name] = (stoker.DataLoader(io.RawDataset(path, "float32", (RECORD,)),
                                               persistent_workers=persistent, **kw) if side == "stoker" else
                             torch.utils.data.DataLoader(NumpyRaw(path, records, RECORD),
                                                         persistent_workers=persistent, **kw))
            got[name] = ([], [])
        for loader in loaders.values():
            timed_epoch(loader)
        for r in range(rounds):
            for name in (list(loaders) if r % 2 == 0 else list(reversed(loaders))):
                f0 = minor_faults()
                got[name][0].append(timed_epoch(loaders[name])[1])
                got[name][1].append(minor_faults() - f0)
        del loaders
    return {k: (statistics.median(a), statistics.median(b)) for k, (a, b) in got.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default="/var/tmp")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        path = os.path.join(d, "records.bin")
        rng = np.random.default_rng(0)
        with open(path, "wb") as f:
            for _ in range(args.records):
                rng.random(RECORD, dtype=np.float32).tofile(f)
        kw = dict(batch_size=8, shuffle=True, num_workers=2)
        makers = {"stoker": lambda: stoker.DataLoader(io.RawDataset(path, "float32", (RECORD,)), **kw),
                  "torch": lambda: torch.utils.data.DataLoader(NumpyRaw(path, args.records, RECORD), **kw)}
        res = {k: ([], []) for k in makers}
        timed_epoch(makers["stoker"]())  # page cache, imports
        for r in range(args.rounds):
            for name in (("stoker", "torch") if r % 2 == 0 else ("torch", "stoker")):
                first, whole = timed_epoch(makers[name]())
                res[name][0].append(first)
                res[name][1].append(whole)
        later = later_epochs(path, args.records, args.rounds, kw)
    med = {k: (statistics.median(a), statistics.median(b)) for k, (a, b) in res.items()}
    gb = args.records * RECORD * 4 / 1e9
    s, t = med["stoker"], med["torch"]
    print(f"{args.records} MiB epoch, medians of {args.rounds} new loaders: first batch stoker {s[0] * 1e3:.1f} ms, "
          f"torch {t[0] * 1e3:.1f} ms ({t[0] / s[0]:.1f}x sooner); epoch stoker {s[1] * 1e3:.0f} ms "
          f"({gb / s[1]:.2f} GB/s), torch {t[1] * 1e3:.0f} ms ({gb / t[1]:.2f} GB/s) = {t[1] / s[1]:.1f}x")
    for name, (sec, faults) in later.items():
        print(f"later epochs, {name}: {sec * 1e3:.0f} ms ({gb / sec:.2f} GB/s), {faults:.0f} minor faults per epoch")
    print(json.dumps({"records": args.records, "stoker_first_s": s[0], "torch_first_s": t[0],
                      "stoker_epoch_s": s[1], "torch_epoch_s": t[1],
                      "later_epochs": {k: {"epoch_s": v[0], "minor_faults": v[1]} for k, v in later.items()}}))


if __name__ == "__main__":
    main()
