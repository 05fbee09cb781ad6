"""Copy-on-read, measured: a dataset that keeps millions of file names.

    python bench/names_pss.py --names 5000000 --workers 2

Side by side, each in a fresh Python process:
  torch:  the names in a Python list, under torch.utils.data.DataLoader;
  stoker: the same names in a stoker.shared.StringList, under stoker.DataLoader.
Both run one full shuffled epoch with persistent workers (so the workers are
still alive when the epoch ends).  __getitem__ reads the name and returns a
small tensor, as a dataset that opens the file would.  Reported: the sum of
PSS over the process tree (main + workers) once the first batch arrived
("start") and after the last ("end"), and the end-to-start growth.  PSS
charges each shared page once across the tree, so copied pages show up and
shared ones do not double count.  Prints a table and, last, a JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _names(n):
    return (f"/datasets/imagenet/train/n{i % 1000:08d}/n{i % 1000:08d}_{i:09d}.JPEG" for i in range(n))


class Shuffled:
    """A shuffled order held as one numpy array, so the sampler's memory is
    the same at the start and the end of the epoch (torch's RandomSampler
    builds a Python list of every index per epoch and frees it at the end,
    which would hide growth)."""

    def __init__(self, n, seed=0):
        import numpy as np
        self.order = np.random.default_rng(seed).permutation(n)

    def __len__(self):
        return len(self.order)

    def __iter__(self):
        for i in self.order:
            yield int(i)


class NamesDataset:
    """Module-level so spawn could pickle it; the container is the variable."""

    def __init__(self, names):
        self.names = names

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        import torch
        return torch.tensor([i, len(self.names[i])])


def run_side(side: str, n: int, workers: int, batch_size: int) -> dict:
    import torch
    from stoker.bench.memory import tree_pss
    torch.manual_seed(0)
    if side == "torch":
        names = list(_names(n))
        loader_cls = torch.utils.data.DataLoader
        extra = {}
    else:
        import stoker
        from stoker import shared
        names = shared.StringList(_names(n))
        loader_cls = stoker.DataLoader
        extra = {}
    ds = NamesDataset(names)
    del names
    loader = loader_cls(ds, batch_size=batch_size, sampler=Shuffled(n), num_workers=workers,
                        persistent_workers=True, **extra)
    t0 = time.perf_counter()
    it = iter(loader)
    first = next(it)
    start = tree_pss()
    count = first.shape[0]
    total = int(first[:, 1].sum())
    for b in it:
        count += b.shape[0]
        total += int(b[:, 1].sum())
    end = tree_pss()
    elapsed = time.perf_counter() - t0
    assert count == n, f"{side}: saw {count} samples of {n}"
    return {"side": side, "start_pss": start, "end_pss": end, "growth": end / start - 1,
            "seconds": elapsed, "chars": total}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--names", type=int, default=5_000_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--side", choices=["torch", "stoker"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.side:
        print(json.dumps(run_side(a.side, a.names, a.workers, a.batch_size)))
        return 0
    results = {}
    for side in ("torch", "stoker"):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--side", side, "--names", str(a.names),
                              "--workers", str(a.workers), "--batch-size", str(a.batch_size)],
                             check=True, capture_output=True, text=True)
        results[side] = json.loads(out.stdout.strip().splitlines()[-1])
    t, s = results["torch"], results["stoker"]
    assert t["chars"] == s["chars"], "both sides must read the same names"
    mib = 1 << 20
    print(f"{a.names:,} file names, {a.workers} workers, batch {a.batch_size}, one shuffled epoch")
    print(f"{'':8}{'start PSS':>12}{'end PSS':>12}{'growth':>9}{'epoch s':>9}")
    for r in (t, s):
        print(f"{r['side']:8}{r['start_pss'] / mib:>10.0f}Mi{r['end_pss'] / mib:>10.0f}Mi"
              f"{100 * r['growth']:>8.1f}%{r['seconds']:>9.1f}")
    summary = {"names": a.names, "workers": a.workers, "torch": t, "stoker": s,
               "stoker_end_over_torch_end": s["end_pss"] / t["end_pss"]}
    print(f"stoker ends at {100 * summary['stoker_end_over_torch_end']:.0f}% of torch's tree")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
