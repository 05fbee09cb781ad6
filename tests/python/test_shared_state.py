"""Shared mutable state across workers (Lock, Counter, BagSampler)
and set_epoch reaching persistent workers."""
import collections
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, IterableDataset

import stoker
from stoker import shared


# ---- multiple-instance learning: bags ------------------------------------------------

class MILDataset(Dataset):
    """Each sample is a bag; a draw takes k of its instances, shared across workers."""

    def __init__(self, sampler, n):
        self.sampler, self.n = sampler, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        bag = i % len(self.sampler)
        cycle, picks = self.sampler.draw(bag, with_cycle=True)
        return np.concatenate(([bag, cycle], picks))


@pytest.mark.parametrize("workers,ctx", [(2, "fork"), (4, "fork"), (2, "spawn")])
def test_no_instance_twice_within_a_cycle_across_workers(workers, ctx):
    sampler = shared.BagSampler([64] * 100, k=4, seed=5)
    n = 20_000 if ctx == "fork" else 4_000
    loader = stoker.DataLoader(MILDataset(sampler, n), batch_size=50, shuffle=True, num_workers=workers,
                               multiprocessing_context=ctx)
    rows = torch.cat(list(loader)).numpy()
    assert len(rows) == n and sampler.draws == n
    per_cycle = collections.defaultdict(list)
    for bag, cycle, *picks in rows.tolist():
        per_cycle[(bag, cycle)] += picks
    for (bag, cycle), picks in per_cycle.items():
        assert len(picks) == len(set(picks)), f"bag {bag} cycle {cycle}: an instance drawn twice {sorted(picks)}"
        assert len(picks) <= 64
    full = [p for (b, c), p in per_cycle.items() if len(p) == 64]
    assert len(full) >= 100 * (n // 100 // 16 - 1), "complete cycles cover every instance once"
    assert sampler.recoveries == 0


def chi_square(observed, expected):
    return float(((observed - expected) ** 2 / expected).sum())


def test_draws_follow_the_weights_chi_square():
    # The first pick of a fresh cycle has probability w_i / sum(w).
    w = np.arange(1, 17, dtype=np.float64)
    sampler = shared.BagSampler([16], k=1, weights=[w], seed=11)
    n = 40_000
    counts = np.zeros(16)
    for _ in range(n):
        sampler.reset(0)
        counts[sampler.draw(0)[0]] += 1
    stat = chi_square(counts, n * w / w.sum())
    assert stat < 37.7, f"chi-square {stat:.1f} with 15 degrees of freedom (p < 0.001 above 37.7)"
    # And a weight of 0 is never drawn, even when it is the last one left.
    z = shared.BagSampler([4], k=1, weights=[[0, 1, 1, 1]], seed=1)
    assert sorted(int(z.draw(0)[0]) for _ in range(30)) == sorted([1, 2, 3] * 10)


class WeightedMIL(Dataset):
    def __init__(self, sampler):
        self.sampler = sampler

    def __len__(self):
        return 4000

    def __getitem__(self, i):
        return self.sampler.draw(0)


def test_weights_set_in_the_main_process_reach_every_worker():
    sampler = shared.BagSampler([8], k=1, weights=[np.ones(8)], seed=3)
    loader = stoker.DataLoader(WeightedMIL(sampler), batch_size=100, num_workers=2, persistent_workers=True)
    first = torch.cat(list(loader)).flatten()
    assert len(set(first.tolist())) == 8
    sampler.set_weights(0, [0, 0, 0, 0, 0, 0, 1, 1])  # e.g. from the loss, between epochs
    second = torch.cat(list(loader)).flatten()
    assert set(second.tolist()) == {6, 7}, "the workers drew with the new weights"
    with pytest.raises(ValueError, match="has 8 instances, got 3 weights"):
        sampler.set_weights(0, [1, 2, 3])


def test_exhaustion_options():
    s = shared.BagSampler([5], k=2, on_exhausted="fewer", seed=0)
    assert [len(s.draw(0)) for _ in range(4)] == [2, 2, 1, 2]
    r = shared.BagSampler([5], k=2, on_exhausted="raise", seed=0)
    r.draw(0), r.draw(0)
    with pytest.raises(shared.BagExhausted, match=r"bag 0 has 1 instances left.*reset\(0\)"):
        r.draw(0)
    r.reset(0)
    assert r.remaining(0) == 5
    with pytest.raises(ValueError, match="on_exhausted"):
        shared.BagSampler([5], k=2, on_exhausted="wrap")
    with pytest.raises(ValueError, match="fewer than k=8"):
        shared.BagSampler([5, 9], k=8)
    with pytest.raises(ValueError, match="no bag 7"):
        s.draw(7)


# ---- robustness: SIGKILL while holding a Lock or inside draw ----------------------

class HoldsLockThenHangs(Dataset):
    """The first sample to run takes the lock and hangs holding it."""

    def __init__(self, lock, counter, armed, holder):
        self.lock, self.counter, self.armed, self.holder = lock, counter, armed, holder

    def __len__(self):
        return 8

    def __getitem__(self, i):
        with self.lock:
            if self.lock.previous_owner_died:
                self.counter.add(1000)  # the dead holder's half-done update is repaired here
            self.counter.add(1)
            if self.armed.compare_exchange(1, 0)[0]:
                self.holder.value = os.getpid()
                time.sleep(3600)  # SIGKILLed here, holding the lock
        return i


def test_worker_killed_holding_the_lock_does_not_deadlock_the_others():
    lock, counter, armed, holder = shared.Lock(), shared.Counter(), shared.Counter(1), shared.Counter()
    it = iter(stoker.DataLoader(HoldsLockThenHangs(lock, counter, armed, holder), batch_size=1, num_workers=2,
                                max_worker_restarts=1))
    got = []
    t = threading.Thread(target=lambda: got.extend(int(b) for b in it), daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while holder.value == 0:  # a worker holds the lock, asleep; the other waits for it
        assert time.monotonic() < deadline, "no worker took the lock"
        time.sleep(0.01)
    os.kill(holder.value, signal.SIGKILL)
    t.join(60)
    assert not t.is_alive(), "the other worker stayed blocked on the dead holder's lock"
    assert sorted(got) == list(range(8)), "every sample, the dead worker's too (restarted), exactly once"
    assert lock.owner_deaths == 1 and counter.value >= 1000, "the next holder was told the last one died"
    with lock:
        assert not lock.previous_owner_died


def test_lock_is_reentrant_and_times_out():
    lock = shared.Lock()
    with lock:
        with lock:
            pass
        t = threading.Thread(target=lambda: results.append(lock.acquire(timeout=0.05)))
        results = []
        t.start()
        t.join()
        assert results == [False], "another thread cannot take it"
        assert lock.acquire(blocking=False), "the holder can take it again without blocking"
        lock.release()
    assert lock.acquire(timeout=0.01)
    lock.release()
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()


CTRL_C_LOCK = r"""
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # (a shell's background job starts with SIGINT ignored)
from stoker import shared
lock = shared.Lock()
held = threading.Event()

def hold():  # another thread takes it and never lets go
    lock.acquire()
    held.set()
    time.sleep(120)

threading.Thread(target=hold, daemon=True).start()
held.wait()
for timeout in (-1, 60):
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        lock.acquire(timeout=timeout)
        print("acquired", flush=True)
    except KeyboardInterrupt:
        print("interrupted after %.2f s" % (time.monotonic() - t0), flush=True)
os._exit(0)
"""


def test_ctrl_c_ends_a_wait_for_a_lock_that_is_never_released():
    """The wait for a Lock goes on without the GIL in a robust mutex, which
    signals do not interrupt: Python's handlers run every 100 ms between
    slices of it, so Ctrl-C raises KeyboardInterrupt there, with and
    without a timeout (it waited until the lock came free: forever)."""
    r = subprocess.run([sys.executable, "-c", CTRL_C_LOCK], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    lines = r.stdout.split("\n")
    got = [line for line in lines if line.startswith("interrupted after")]
    assert len(got) == 2, r.stdout + r.stderr
    assert all(float(line.split()[2]) < 5 for line in got), got


def _draw_forever(sampler):
    while True:
        sampler.draw(int.from_bytes(os.urandom(1), "little") % 4)


def test_drawers_killed_at_random_leave_bags_consistent():
    import multiprocessing as mp
    sampler = shared.BagSampler([32] * 4, k=4, seed=9)
    ctx = mp.get_context("fork")
    for _ in range(20):
        procs = [ctx.Process(target=_draw_forever, args=(sampler,), daemon=True) for _ in range(2)]
        for p in procs:
            p.start()
        time.sleep(0.02)
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
            p.join()
    # Every bag is usable (no deadlock) and consistent: a full cycle of draws
    # from a fresh state yields every instance exactly once.
    for bag in range(4):
        sampler.reset(bag)
        picks = np.concatenate([sampler.draw(bag) for _ in range(8)])
        assert sorted(picks.tolist()) == list(range(32))
    print("recoveries:", sampler.recoveries, "draws:", sampler.draws)


def test_counter_across_workers():
    counter = shared.Counter(10)

    class Counts(Dataset):
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            counter.add(1)
            return i

    list(stoker.DataLoader(Counts(), batch_size=10, num_workers=2))
    assert counter.value == 1010
    counter += 5
    assert int(counter) == 1015 and counter.compare_exchange(1015, 0) == (True, 1015) and counter.value == 0


# ---- set_epoch --------------------------------------------------------------------

class EpochAware(Dataset):
    def __init__(self):
        self.epoch = -1

    def set_epoch(self, e):
        self.epoch = e

    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.tensor([i, self.epoch])


class EpochStream(IterableDataset):
    def __init__(self):
        self.epoch = -1

    def set_epoch(self, e):
        self.epoch = e

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        for i in range(info.id, 20, info.num_workers):
            yield torch.tensor([i, self.epoch])


@pytest.mark.parametrize("ds", [EpochAware, EpochStream])
@pytest.mark.parametrize("persistent", [True, False])
def test_set_epoch_reaches_workers_before_the_epochs_first_batch(ds, persistent):
    sampler = torch.utils.data.DistributedSampler(ds(), num_replicas=1, rank=0) if ds is EpochAware else None
    loader = stoker.DataLoader(ds(), batch_size=4, num_workers=2, persistent_workers=persistent, sampler=sampler)
    for e in range(3):
        loader.set_epoch(e)
        rows = torch.cat(list(loader))
        assert set(rows[:, 1].tolist()) == {e}, f"epoch {e}: workers saw {set(rows[:, 1].tolist())}"
        if sampler is not None:
            assert sampler.epoch == e
    with pytest.raises(ValueError, match="non-negative int"):
        loader.set_epoch(-1)


def test_set_epoch_without_workers():
    ds = EpochAware()
    loader = stoker.DataLoader(ds, batch_size=4)
    loader.set_epoch(7)
    assert set(torch.cat(list(loader))[:, 1].tolist()) == {7}


class LateState(Dataset):
    """Gets its shared state after the loader is built."""

    def __len__(self):
        return 100

    def __getitem__(self, i):
        self.hits.add(1)
        self.seen[i] = 1
        return i


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_state_created_after_the_loader_reaches_the_workers(ctx):
    ds = LateState()
    loader = stoker.DataLoader(ds, batch_size=10, num_workers=2, multiprocessing_context=ctx)
    ds.hits, ds.seen = shared.Counter(), shared.Array((100,), "uint8")
    assert len(list(loader)) == 10
    assert ds.hits.value == 100 and int(ds.seen.numpy().sum()) == 100
