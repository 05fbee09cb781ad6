"""A worker dies mid-epoch (SIGKILL, SIGSEGV, os._exit(3)): how long from its
death until the training loop's next() raises; torch's DataLoader and
stoker's in the same run, alternating, same dataset and arguments.

    python bench/crash_latency.py --rounds 20

The worker writes time.monotonic() to a file just before it dies (no core
dump: PR_SET_DUMPABLE 0), the loop reads it once the exception arrives.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import statistics
import tempfile
import time

import torch
from torch.utils.data import Dataset

import stoker

KINDS = {
    "sigkill": lambda: os.kill(os.getpid(), signal.SIGKILL),
    "sigsegv": lambda: ctypes.string_at(0),
    "exit3": lambda: os._exit(3),
}


class Dies(Dataset):
    def __init__(self, how: str, stamp: str):
        self.how, self.stamp = how, stamp

    def __len__(self):
        return 64

    def __getitem__(self, i):
        if i == 25:
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE: no core, whatever ulimit -c says
            with open(self.stamp, "w") as f:
                f.write(repr(time.monotonic()))
            KINDS[self.how]()
        time.sleep(0.001)
        return torch.tensor(i)


def one(loader_cls, how: str, stamp: str) -> float:
    """Milliseconds from the death to the exception in the loop."""
    loader = loader_cls(Dies(how, stamp), batch_size=3, num_workers=2)
    try:
        for _ in loader:
            pass
    except RuntimeError:  # stoker.WorkerCrashed is one; torch raises RuntimeError
        return (time.monotonic() - float(open(stamp).read())) * 1e3
    raise SystemExit(f"{loader_cls.__module__}: the epoch ended without the worker's death being reported")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    loaders = {"torch": torch.utils.data.DataLoader, "stoker": stoker.DataLoader}
    got = {(name, how): [] for name in loaders for how in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        stamp = os.path.join(tmp, "died_at")
        for _ in range(args.rounds):
            for how in KINDS:
                for name, cls in loaders.items():
                    got[name, how].append(one(cls, how, stamp))
    print(f"death -> exception in the loop, ms ({args.rounds} rounds, 2 workers, fork)")
    for how in KINDS:
        for name in loaders:
            v = sorted(got[name, how])
            print(f"{how:8s} {name:7s} median {statistics.median(v):8.2f}  max {v[-1]:8.2f}")


if __name__ == "__main__":
    main()
