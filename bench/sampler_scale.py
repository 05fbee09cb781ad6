"""A rank's share of a shuffled epoch at scale: torch's DistributedSampler vs
stoker's ShardedSampler (same order), and a loader's first batch and state size.

    python bench/sampler_scale.py

For 1M, 10M and 50M samples on 1,000 ranks (rank 7): the time until the
first index of an epoch and the memory the sampler's iterator holds (USS
growth), then the time to the first batch of a 2-worker stoker.DataLoader and
the size of its state_dict().
"""
from __future__ import annotations

import os
import pickle
import time

import torch
from torch.utils.data import DistributedSampler

import stoker
from stoker._native import lib
from stoker.distributed import sharded_sampler


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


class Tiny(torch.utils.data.Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        return torch.zeros(16)


def measure(make, n):
    sampler = make(Sized(n))
    before = lib.process_memory(os.getpid())["uss"]
    t = time.perf_counter()
    it = iter(sampler)
    next(it)
    seconds = time.perf_counter() - t
    held = lib.process_memory(os.getpid())["uss"] - before
    del it
    return seconds, held


def main():
    for n in (1_000_000, 10_000_000, 50_000_000):
        t_s, t_m = measure(lambda d: DistributedSampler(d, num_replicas=1000, rank=7, shuffle=True, seed=0), n)
        s_s, s_m = measure(lambda d: sharded_sampler(d, 1000, 7, True, 0, False), n)
        print(f"{n:>11,} samples: DistributedSampler {t_s:5.2f} s, {t_m / 2**20:6.0f} MiB held; "
              f"ShardedSampler {s_s:5.2f} s, {s_m / 2**20:6.0f} MiB held")
    loader = stoker.DataLoader(Tiny(), batch_size=8, shuffle=True, num_workers=2)
    t = time.perf_counter()
    it = iter(loader)
    next(it)
    print(f"first batch, 2 workers: {1000 * (time.perf_counter() - t):.0f} ms; "
          f"state_dict: {len(pickle.dumps(loader.state_dict()))} bytes")


if __name__ == "__main__":
    main()
