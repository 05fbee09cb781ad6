"""Random augmentation is reproducible and equal to torch's, batch for batch:
batch k goes to worker k mod num_workers, a replacement worker continues the
dead one's random streams, and exact resume restores every worker's streams."""
import logging
import os
import random
import signal
import threading
import time

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset

import stoker
from leaks import Baseline


class Augmented(Dataset):
    """Draws from all three of a worker's streams in __getitem__, as a random
    crop or flip does; uneven sample times, so a free assignment of batches to
    workers would differ from run to run."""

    def __init__(self, n=64, slow_every=7):
        self.n, self.slow_every = n, slow_every

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow_every and i % self.slow_every == 0:
            time.sleep(0.003)
        return torch.tensor([i, random.randrange(1 << 30), int(np.random.randint(1 << 30)),
                             int(torch.randint(1 << 30, ()))])


def draw_in_init(worker_id):
    random.random()
    torch.rand(3)


def batches(cls, dataset, epochs=1, seed=1, **kw):
    loader = cls(dataset, generator=torch.Generator().manual_seed(seed), **kw)
    out = []
    for _ in range(epochs):
        out.append([b.clone() for b in loader])
    return out


def assert_same(expected, got):
    assert len(expected) == len(got)
    for e, (a, b) in enumerate(zip(expected, got)):
        assert len(a) == len(b), f"epoch {e}: {len(a)} batches against {len(b)}"
        for k, (x, y) in enumerate(zip(a, b)):
            assert torch.equal(x, y), f"epoch {e}, batch {k}: {x.tolist()} != {y.tolist()}"


CASES = {
    "2 workers": dict(batch_size=4, shuffle=True, num_workers=2),
    "3 workers, persistent, 2 epochs": dict(batch_size=3, shuffle=True, num_workers=3, persistent_workers=True,
                                            epochs=2),
    "no batching": dict(batch_size=None, shuffle=False, num_workers=2),
    "worker_init_fn draws": dict(batch_size=4, shuffle=True, num_workers=2, worker_init_fn=draw_in_init),
    "prefetch 1, drop_last": dict(batch_size=5, shuffle=True, num_workers=2, prefetch_factor=1, drop_last=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_augmented_batches_equal_torch_in_every_run(case):
    kw = dict(CASES[case])
    epochs = kw.pop("epochs", 1)
    expected = batches(torch.utils.data.DataLoader, Augmented(), epochs, **kw)
    for _run in range(2):
        assert_same(expected, batches(stoker.DataLoader, Augmented(), epochs, **kw))


def test_spawned_workers_draw_as_torch():
    kw = dict(batch_size=4, shuffle=True, num_workers=2, multiprocessing_context="spawn")
    assert_same(batches(torch.utils.data.DataLoader, Augmented(32, 0), **kw),
                batches(stoker.DataLoader, Augmented(32, 0), **kw))


def test_out_of_order_is_still_every_index_once():
    """in_order=False assigns batches to whichever worker is free (documented
    as not reproducible): every index still arrives once."""
    got = batches(stoker.DataLoader, Augmented(), batch_size=4, shuffle=True, num_workers=2, in_order=False)[0]
    assert sorted(int(i) for b in got for i in b[:, 0]) == list(range(64))



class _SlowFirstIterable(torch.utils.data.IterableDataset):
    """Worker w yields (w, i) for its five items; worker 1 sleeps on its first."""

    def __iter__(self):
        w = torch.utils.data.get_worker_info().id
        for i in range(5 * w, 5 * w + 5):
            if w == 1 and i == 5:
                time.sleep(1.0)
            yield torch.tensor([w, i])


class _SlowIndex(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        if i == 0:
            time.sleep(1.0)
        return i


def test_out_of_order_a_slow_worker_holds_only_its_share_iterable():
    # As torch keeps each worker supplied with up to prefetch_factor tasks:
    # worker 1 is stuck on its first item, and worker 0 must deliver all of
    # its own items meanwhile, not wait for a task worker 1 holds.
    got = [tuple(b[0].tolist()) for b in stoker.DataLoader(_SlowFirstIterable(), num_workers=2, in_order=False)]
    assert sorted(got) == [(0, i) for i in range(5)] + [(1, i) for i in range(5, 10)]
    assert got[:5] == [(0, i) for i in range(5)], got


def test_out_of_order_a_slow_worker_holds_only_its_share_map_style():
    # Index 0 takes 1 s on worker 0, which holds at most prefetch_factor (2)
    # batches meanwhile: the other worker delivers the other 18 first.
    got = [int(b) for b in stoker.DataLoader(_SlowIndex(), num_workers=2, in_order=False)]
    assert sorted(got) == list(range(20))
    assert got.index(0) >= 18, got

def resumed(make, cut, epoch_before=0):
    loader = make()
    for _ in range(epoch_before):
        for _b in loader:
            pass
    it = iter(loader)
    head = [next(it).clone() for _ in range(cut)]
    state = loader.state_dict()
    del it, loader
    again = make()
    again.load_state_dict(state)
    return head + [b.clone() for b in again], state


@pytest.mark.parametrize("cut", [0, 1, 2, 5, 11, 16])
def test_resumed_augmented_batches_equal_the_uninterrupted_run(cut):
    kw = dict(batch_size=4, shuffle=True, num_workers=2)
    expected = batches(torch.utils.data.DataLoader, Augmented(), **kw)[0]
    got, state = resumed(lambda: stoker.DataLoader(Augmented(), generator=torch.Generator().manual_seed(1), **kw),
                         cut)
    assert_same([expected], [got])
    # None: a worker that has recorded nothing yet starts from torch's seed.
    assert len(state["worker_rng"]) == 2
    if cut >= 2:
        assert all(isinstance(s, bytes) for s in state["worker_rng"])


def test_resume_in_the_second_epoch_of_persistent_workers():
    kw = dict(batch_size=4, shuffle=True, num_workers=2, persistent_workers=True)
    expected = batches(torch.utils.data.DataLoader, Augmented(), epochs=2, **kw)
    got, _ = resumed(lambda: stoker.DataLoader(Augmented(), generator=torch.Generator().manual_seed(1), **kw),
                     cut=6, epoch_before=1)
    assert_same([expected[1]], [got])


def test_a_replacement_worker_continues_the_dead_ones_random_streams(caplog):
    base = Baseline()
    kw = dict(batch_size=4, shuffle=True, num_workers=2)
    expected = batches(torch.utils.data.DataLoader, Augmented(), **kw)[0]
    # prefetch_factor=2 (torch's depth): the workers are still loading when
    # they are killed (left to stoker, tiny batches go deeper and a short
    # epoch is all loaded before the later kills).
    loader = stoker.DataLoader(Augmented(), generator=torch.Generator().manual_seed(1), max_worker_restarts=4,
                               prefetch_factor=2, **kw)
    it = iter(loader)
    got = []
    with caplog.at_level(logging.WARNING, logger="stoker"):
        for k, b in enumerate(it):
            got.append(b.clone())
            if k in (0, 3, 7, 8):
                os.kill(it._workers[k % 2].pid, signal.SIGKILL)
                time.sleep(0.05)
    assert_same([expected], [got])
    assert len(it.restarts) == 4
    assert {r["random_state"] for r in it.restarts} == {"continued"}
    del it, loader, b
    base.assert_clean()


class Jittery(Dataset):
    def __init__(self, n, sleep_s=0.0):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i % 97 == 0:
            time.sleep(0.002)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.tensor([i, random.randrange(1 << 30)])


def test_restart_storm_three_epochs_every_batch_once_in_torchs_order():
    """Workers SIGKILLed every 50-300 ms through three epochs: many restarts
    fall inside one next(), which must not recurse (replacements forked from
    a deep stack died of RecursionError)."""
    n, bs = 12_000, 10
    kw = dict(batch_size=bs, shuffle=True, num_workers=2)
    expected = batches(torch.utils.data.DataLoader, Jittery(n), epochs=3, seed=5, **kw)
    loader = stoker.DataLoader(Jittery(n, sleep_s=0.0002), generator=torch.Generator().manual_seed(5),
                               max_worker_restarts=100_000, **kw)
    logging.getLogger("stoker").setLevel(logging.ERROR)  # hundreds of restart warnings
    kills = [0]
    current = [None]
    stop = threading.Event()

    def killer():
        rng = random.Random(7)
        while not stop.wait(rng.uniform(0.05, 0.3)):
            it = current[0]
            pids = [w.pid for w in (it._workers if it is not None else []) if w is not None and w.pid]
            if pids:
                try:
                    os.kill(rng.choice(pids), signal.SIGKILL)
                    kills[0] += 1
                except ProcessLookupError:
                    pass

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    got = []
    try:
        for _epoch in range(3):
            it = iter(loader)
            current[0] = it
            got.append([b.clone() for b in it])
            current[0] = None
    finally:
        stop.set()
        t.join()
        logging.getLogger("stoker").setLevel(logging.NOTSET)
    assert kills[0] >= 10
    assert_same(expected, got)


@pytest.mark.parametrize("native", [False, True])
def test_two_threads_on_one_iterator_get_every_batch_once(native, tmp_path):
    """A prefetching thread beside the training loop: both call next() on one
    iterator.  This froze the interpreter (both threads in the pump, one's
    saved thread state overwritten by the other's)."""
    n = 6_000
    if native:
        np.save(tmp_path / "rows.npy", np.arange(n, dtype=np.int64).reshape(n, 1))
        dataset = stoker.io.NpyDataset(tmp_path / "rows.npy")
    else:
        dataset = Jittery(n)
    loader = stoker.DataLoader(dataset, batch_size=32, num_workers=2, timeout=60)
    it = iter(loader)
    got = [[], []]
    beats = [0]
    done = threading.Event()

    def take(k):
        for b in it:
            got[k].append(b[:, 0].clone())

    def heartbeat():
        while not done.wait(0.01):
            beats[0] += 1

    threads = [threading.Thread(target=take, args=(k,)) for k in range(2)] + [threading.Thread(target=heartbeat)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads[:2]:
        t.join(120)
        assert not t.is_alive(), "a thread is stuck in next()"
    elapsed = time.monotonic() - t0
    done.set()
    threads[2].join()
    ids = sorted(int(i) for part in got for b in part for i in b)
    assert ids == list(range(n))
    # A third thread kept running all along (a wait holding the GIL stops it).
    assert beats[0] >= min(5, int(elapsed / 0.03)), (beats[0], elapsed)


def test_two_threads_each_iterating_a_persistent_loader_never_deadlock():
    loader = stoker.DataLoader(Jittery(3_000), batch_size=32, num_workers=2, persistent_workers=True, timeout=60)
    counts = [0, 0]
    errors = []

    def run(k):
        try:
            for _ in range(2):
                for _b in loader:
                    counts[k] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "a thread is stuck iterating"
    assert not errors, errors
    assert sum(counts) > 0
