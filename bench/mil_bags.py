"""Shared sampling state across workers: the hand-written MIL pattern (shared
tensors under a Manager lock) vs BagSampler.

    python bench/mil_bags.py --seconds 5

The workload (examples/mil_bag_sampling.py): 100 bags of 64 instances; each sample is a
bag, and a worker draws k=4 of its instances without replacement across all
workers, zeroing what it drew in the bag's probability vector and resetting
the vector once fewer than k are left.  Two datasets do exactly that and
return the drawn instances' features (16 float32 each) and indices:

  manual: probability vectors in shared torch tensors (share_memory_()), the
          update under a torch.multiprocessing Manager().RLock(), picks by
          torch.multinomial; loaded by torch.utils.data.DataLoader;
  stoker: one stoker.shared.BagSampler; loaded by stoker.DataLoader.

Both: batch 64, 2 workers, shuffled, measured over --seconds after the first
batch.  Also the raw draw rate of BagSampler.draw, in one process and with 2
processes drawing at once (the same bags), and of the hand-written locked update in
one process.  Prints a table and, last, a JSON line.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

import numpy as np
import torch

BAGS, SIZE, K, DIM = 100, 64, 4, 16


def features():
    return np.random.default_rng(0).standard_normal((BAGS, SIZE, DIM), dtype=np.float32)


class ManualMIL(torch.utils.data.Dataset):
    """The hand-written pattern, step by step."""

    def __init__(self, n):
        self.n = n
        self.feats = features()
        self.main_lock = torch.multiprocessing.Manager().RLock()
        self.uniform = [torch.full((SIZE,), 1.0 / SIZE) for _ in range(BAGS)]
        self.probs = [u.clone().share_memory_() for u in self.uniform]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        bag = i % BAGS
        with self.main_lock:
            local = self.probs[bag].clone()
            if torch.count_nonzero(local).item() < K:
                self.probs[bag][:] = self.uniform[bag]
                local = self.probs[bag].clone()
            picks = torch.multinomial(local, K, replacement=False)
            self.probs[bag][picks] = 0
        p = picks.numpy()
        return self.feats[bag, p], p


class StokerMIL(torch.utils.data.Dataset):
    """The same with a BagSampler."""

    def __init__(self, n):
        from stoker import shared
        self.n = n
        self.feats = features()
        self.bags = shared.BagSampler([SIZE] * BAGS, k=K, seed=0)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        bag = i % BAGS
        p = self.bags.draw(bag)
        return self.feats[bag, p], p


def loader_rate(side: str, seconds: float, workers: int) -> dict:
    n = 10_000_000
    if side == "manual":
        ds = ManualMIL(n)
        loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
    else:
        import stoker
        ds = StokerMIL(n)
        loader = stoker.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
    it = iter(loader)
    x, p = next(it)
    assert x.shape == (64, K, DIM) and p.shape == (64, K)
    samples, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        x, p = next(it)
        samples += p.shape[0]
    elapsed = time.perf_counter() - t0
    del it
    return {"samples_per_s": samples / elapsed, "samples": samples, "seconds": elapsed}


def _draw_loop(sampler, seconds, out):
    n, t0 = 0, time.perf_counter()
    while True:
        for b in range(BAGS):
            sampler.draw(b)
        n += BAGS
        if time.perf_counter() - t0 >= seconds:
            break
    out.put((n, time.perf_counter() - t0))


def raw_draw_rates(seconds: float) -> dict:
    from stoker import shared
    sampler = shared.BagSampler([SIZE] * BAGS, k=K, seed=1)
    q = mp.get_context("fork").Queue()
    _draw_loop(sampler, seconds, q)
    n, dt = q.get()
    alone = n / dt
    procs = [mp.get_context("fork").Process(target=_draw_loop, args=(sampler, seconds, q)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    contended = sum(n for n, _ in results) / max(dt for _, dt in results)
    # The hand-written locked update, in one process (no loader).
    manual = ManualMIL(1)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min(seconds, 2.0):
        manual[n]
        n += 1
    manual_rate = n / (time.perf_counter() - t0)
    return {"bag_sampler_draws_per_s": alone, "bag_sampler_draws_per_s_2_procs": contended,
            "manual_draws_per_s": manual_rate}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    manual = loader_rate("manual", a.seconds, a.workers)
    ours = loader_rate("stoker", a.seconds, a.workers)
    raw = raw_draw_rates(min(a.seconds, 2.0))
    ratio = ours["samples_per_s"] / manual["samples_per_s"]
    print(f"MIL bags ({BAGS} x {SIZE}, k={K}), batch 64, {a.workers} workers, {a.seconds:.0f} s each")
    print(f"  hand-written, torch DataLoader   {manual['samples_per_s']:>12,.0f} samples/s")
    print(f"  BagSampler, stoker DataLoader    {ours['samples_per_s']:>12,.0f} samples/s   {ratio:.0f}x")
    print(f"  raw draws/s: BagSampler {raw['bag_sampler_draws_per_s']:,.0f} alone, "
          f"{raw['bag_sampler_draws_per_s_2_procs']:,.0f} with 2 processes contending; "
          f"hand-written locked update {raw['manual_draws_per_s']:,.0f}")
    print(json.dumps({"manual": manual, "stoker": ours, "ratio": ratio, "raw": raw, "workers": a.workers,
                      "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
