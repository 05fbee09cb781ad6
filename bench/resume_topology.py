"""Resume on another topology at scale (issue 49, stoker._topology): a 4-rank
epoch stopped 30% of the way in is resumed by rank 1 of 3 with another batch
size.  For the scalable shuffle (a keyed permutation with random access) and
for torch's order (DistributedSampler's randperm, which can only be drawn
from its start), prints the first batch of a fresh epoch and of the resumed
one (load_state_dict included) and the size of the state: its order part
(recipe and segments) and the whole dict.

    python bench/resume_topology.py [--samples 100000000] [--consumed 0.3] [--rounds 3]
"""
import argparse
import gc
import pickle
import statistics
import time

import torch
from torch.utils.data import DistributedSampler

import stoker
from stoker import _mix_state, _topology
from stoker.mix import MixSampler
from stoker.sampling import ScalableShuffleSampler


class Indices(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=10 ** 8)
    p.add_argument("--consumed", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    ds = Indices(a.samples)
    k = 1000
    mix = stoker.Mix([Indices(a.samples // k)] * k, [1 / (i + 1) for i in range(k)], seed=1)
    samplers = {
        "scalable": lambda w, r: ScalableShuffleSampler(ds, seed=1, num_replicas=w, rank=r),
        "torch's randperm": lambda w, r: DistributedSampler(ds, num_replicas=w, rank=r, shuffle=True, seed=1),
        "Mix of 1,000 sources": lambda w, r: MixSampler(mix, shuffle=True, rank=r, world_size=w),
    }
    print(f"{a.samples:,} samples, 4 ranks x batch 64 stopped at {a.consumed:.0%}, resumed by rank 1 of 3 x batch 100; "
          f"median of {a.rounds} rounds")
    print("| order | fresh epoch: first batch | resumed: load_state_dict + first batch | state: order part | "
          "state: whole |")
    print("|---|---|---|---|---|")
    for name, make in samplers.items():
        fresh, resumed = [], []
        for _ in range(a.rounds):
            data = mix if name.startswith("Mix") else ds
            t = time.perf_counter()
            loader = stoker.DataLoader(data, batch_size=64, sampler=make(4, 0), num_workers=0)
            it = iter(loader)
            next(it)
            fresh.append(time.perf_counter() - t)
            state = loader.state_dict()
            # A restarted job resumes in a fresh process: the first loader's
            # permutation (drawn on a thread of its own) goes first.
            del it, loader
            gc.collect()
            state["delivered"] = int(a.consumed * a.samples / 4 / 64)  # (as if 4 ranks had read that far)
            if data is mix:
                # The counters a loader that had read that far would save (its
                # order's checkpoints are at hand there: this replays them once).
                recipe = dict(state["order"]["recipe"], weights=list(mix.weights))
                now = _topology.segment(recipe["n"], 4, True, state["delivered"], [], 64)
                state["order"]["recipe"] = _mix_state.compact(
                    _mix_state.cursor(recipe, _mix_state.order_of(recipe), [now]))
            t = time.perf_counter()
            again = stoker.DataLoader(data, batch_size=100, sampler=make(3, 1), num_workers=0)
            again.load_state_dict(state)
            it = iter(again)
            next(it)
            resumed.append(time.perf_counter() - t)
            del it
        print(f"| {name} | {statistics.median(fresh) * 1e3:.1f} ms | {statistics.median(resumed) * 1e3:.1f} ms | "
              f"{len(pickle.dumps(state['order']))} B | {len(pickle.dumps(state))} B |")


if __name__ == "__main__":
    main()
