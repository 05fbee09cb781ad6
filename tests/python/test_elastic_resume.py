"""Resume on any topology (issue 49, stoker._topology): a state saved
mid-epoch by any rank of a W-rank job is loaded by every rank of a W'-rank
job with another num_workers and batch size, and over the whole epoch every
sample is delivered exactly once.  The ranks run as real processes under
torchrun (gloo); the other tests run a job's ranks one after another in one
process (a sampler given its rank), which is what lockstep ranks do."""
import collections
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler, RandomSampler, Sampler

import stoker
from stoker.sampling import ScalableShuffleSampler

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
N = 10007  # prime: no world size or batch size divides it

# (world, num_workers, batch_size, batches each rank reads; None: the rest)
SEGMENTS = [(4, 3, 60, 2), (3, 2, 80, 1), (6, 5, 60, 1), (1, 0, 16, None)]


class Samples(torch.utils.data.Dataset):
    def __init__(self, n=N):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def run_segments(make_loader, segments=SEGMENTS, counts=None, ids=lambda b: np.asarray(b).reshape(-1),
                 check=None, first_state=None):
    """Each segment's ranks one after another, each reading its batches;
    rank 0's state goes to the next segment (check(segment number, state)
    first).  Returns the sample counts and the last state."""
    counts = collections.Counter() if counts is None else counts
    state = first_state
    for seg, (world, workers, batch, stop) in enumerate(segments):
        states = []
        for rank in range(world):
            loader = make_loader(world, rank, workers, batch)
            if state is not None:
                loader.load_state_dict(state)
            it = iter(loader)
            for k, b in enumerate(it):
                counts.update(int(v) for v in ids(b))
                if k + 1 == stop:
                    break
            states.append(loader.state_dict())
            del it
        assert all(s["delivered"] == states[0]["delivered"] for s in states), "ranks in lockstep"
        if check is not None and stop is not None:  # (a last segment that ends the epoch leaves no order)
            check(seg, states[0])
        state = states[0]
    return counts, state


def exactly_once(counts, n=N):
    assert len(counts) == n, f"{n - len(counts)} samples never delivered"
    repeated = {i: c for i, c in counts.items() if c != 1}
    assert not repeated, f"{len(repeated)} samples delivered more than once: {sorted(repeated.items())[:8]}"


def distributed_loader(ds, shuffle=True):
    def make(world, rank, workers, batch):
        return stoker.DataLoader(ds, batch_size=batch, num_workers=workers,
                                 sampler=DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=shuffle,
                                                            seed=5))
    return make


def test_an_unshuffled_epoch_resumed_on_4_3_6_1_ranks_delivers_every_sample_once():
    # (A shuffled one, of a Python and of a native dataset: the torchrun test below.)
    counts, state = run_segments(distributed_loader(Samples(), shuffle=False))
    exactly_once(counts)
    assert state["order"]["recipe"]["kind"] == "iota"


def test_the_scalable_shuffle_and_a_single_loaders_random_order_resume_on_other_ranks():
    ds = Samples()

    def scalable(world, rank, workers, batch):
        return stoker.DataLoader(ds, batch_size=batch, num_workers=workers,
                                 sampler=ScalableShuffleSampler(ds, seed=9, num_replicas=world, rank=rank))
    counts, _ = run_segments(scalable)
    exactly_once(counts)

    # One process with shuffle=True (torch's RandomSampler, its seed drawn
    # from torch's generator), then three ranks, then one again.
    torch.manual_seed(4)
    first = [(1, 2, 50, 3)]
    counts, state = run_segments(lambda w, r, nw, b: stoker.DataLoader(ds, batch_size=b, shuffle=True, num_workers=nw),
                                 first)
    assert state["order"]["recipe"]["kind"] == "randperm"
    rest = collections.Counter()
    for world, workers, batch, stop in [(3, 1, 70, 2), (1, 0, 33, None)]:
        states = []
        for rank in range(world):
            loader = distributed_loader(ds)(world, rank, workers, batch)
            loader.load_state_dict(state)
            it = iter(loader)
            for k, b in enumerate(it):
                rest.update(int(v) for v in b)
                if k + 1 == stop:
                    break
            states.append(loader.state_dict())
            del it
        state = states[0]
    exactly_once(counts + rest)


def test_a_random_sampler_with_its_own_generator_resumes_on_two_ranks():
    ds = Samples(777)
    g = torch.Generator().manual_seed(21)
    loader = stoker.DataLoader(ds, batch_size=25, num_workers=1, sampler=RandomSampler(ds, generator=g))
    it = iter(loader)
    head = collections.Counter(int(v) for _ in range(4) for v in next(it))
    state = loader.state_dict()
    del it
    assert state["order"]["recipe"]["kind"] == "randperm_state"
    counts, _ = run_segments(distributed_loader(ds), [(2, 1, 30, None)], head, first_state=state)
    # 777 - 100 = 677 left, split in two padded halves of 339: one repeat.
    assert set(counts) == set(range(777)) and sum(counts.values()) == 778


def test_the_resumed_order_is_a_function_of_the_state_and_the_topology():
    ds = Samples(1000)
    counts, state = run_segments(distributed_loader(ds), [(4, 2, 30, 2)], collections.Counter())

    padding = []

    def rest(rank):
        loader = distributed_loader(ds)(3, rank, 1, 40)
        loader.load_state_dict(state)
        it = iter(loader)
        order = loader.stats()["epoch_order"]
        assert order["samples"] == -(-(1000 - 4 * 60) // 3) and order["segments"] == 1, order
        padding.append(order["padding"])
        return [b.tolist() for b in it]
    first = [rest(r) for r in range(3)]
    assert first == [rest(r) for r in range(3)], "the same on every rerun"
    seen = collections.Counter(i for r in first for b in r for i in b) + counts
    assert set(seen) == set(range(1000))
    # The padding of the three-rank split of the remainder is the only repeat,
    # and stats() counts it.
    assert sum(seen.values()) - 1000 == (-(1000 - 4 * 60) % 3) == sum(padding[:3]) > 0


def test_the_same_topology_still_resumes_in_the_uninterrupted_order():
    ds = Samples(500)
    make = distributed_loader(ds)
    whole = [b.tolist() for b in make(2, 1, 2, 25)]
    loader = make(2, 1, 2, 25)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(5)]
    state = loader.state_dict()
    del it
    again = make(2, 1, 2, 25)
    again.load_state_dict(state)
    assert head + [b.tolist() for b in again] == whole


def test_the_state_stays_small_whatever_the_dataset_size():
    sizes = {}
    for n in (10 ** 6, 10 ** 8):
        ds = Samples(n)
        loader = stoker.DataLoader(ds, batch_size=64, num_workers=0,
                                   sampler=ScalableShuffleSampler(ds, seed=1, num_replicas=4, rank=2))
        it = iter(loader)
        for _ in range(3):
            next(it)
        state = loader.state_dict()
        sizes[n] = len(pickle.dumps(state["order"]))
        resumed = stoker.DataLoader(ds, batch_size=100, num_workers=0,
                                    sampler=ScalableShuffleSampler(ds, seed=1, num_replicas=3, rank=0))
        resumed.load_state_dict(state)
        assert len(next(iter(resumed))) == 100
    assert sizes[10 ** 8] == sizes[10 ** 6] and sizes[10 ** 8] < 4096, sizes


class Mine(Sampler):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(range(self.n - 1, -1, -1))


def test_a_state_that_cannot_move_to_another_topology_is_refused_with_why():
    ds = Samples(100)
    loader = stoker.DataLoader(ds, batch_size=10, sampler=Mine(100), num_workers=0)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    other = stoker.DataLoader(ds, batch_size=20, sampler=Mine(100), num_workers=0)
    with pytest.raises(ValueError, match=r"batch_size=10.*batch_size=20.*its epoch's order is its sampler's own"):
        other.load_state_dict(state)
    same = stoker.DataLoader(ds, batch_size=10, sampler=Mine(100), num_workers=0)
    same.load_state_dict(state)  # the saved topology: as before
    assert next(iter(same)).tolist() == list(range(89, 79, -1))

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(50))
    loader = stoker.DataLoader(Stream(), batch_size=5, num_workers=0)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    with pytest.raises(ValueError, match="an IterableDataset's stream is split between ranks and workers"):
        stoker.DataLoader(Stream(), batch_size=7, num_workers=0).load_state_dict(state)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="torchrun not installed")
def test_real_ranks_4_3_6_1_under_torchrun_read_every_sample_once(tmp_path):
    np.save(tmp_path / "samples.npy", np.arange(N, dtype=np.int64))
    # A Mix of 7 native sources (sample j of source i is 100000 * i + j), by
    # weights that are not their sizes: sources cycle within the epoch.
    sizes = [3001, 1999, 1009, 2003, 997, 89, 911]
    for i, size in enumerate(sizes):
        np.save(tmp_path / f"mix{i}.npy", np.arange(100000 * i, 100000 * i + size, dtype=np.int64))
    from stoker.io import NpyDataset
    mix = stoker.Mix([NpyDataset(tmp_path / f"mix{i}.npy") for i in range(len(sizes))], list(range(1, 8)), seed=2,
                     epoch_samples=N)
    whole = collections.Counter(int(v) for b in stoker.DataLoader(mix, batch_size=97, shuffle=True) for v in b)
    # Text packed as it is tokenized: each rank's position gathered by state_dict() over gloo.
    from test_text_stream import write_corpus
    path, tok, texts = write_corpus(str(tmp_path), n=1500)  # (more than the segments before the last read)
    os.rename(path, tmp_path / "text.jsonl")
    tokens = collections.Counter(d * 100000 + t for d, e in enumerate(tok.encode_batch(texts)) for t in e.ids + [1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1",
           "TMPDIR": str(tmp_path)}
    for seg, (world, workers, batch, stop) in enumerate(SEGMENTS):
        cmd = [TORCHRUN, f"--nproc_per_node={world}", "--master_addr=127.0.0.1", f"--master_port={free_port()}",
               os.path.join(HERE, "elastic_rank.py"), "--dir", str(tmp_path), "--samples", str(N), "--segment", str(seg),
               "--workers", str(workers), "--batch", str(batch), "--stop", str(stop or -1)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, start_new_session=True)
        assert r.returncode == 0, r.stderr[-4000:]
    for kind in ("python", "native", "mix", "packed"):
        counts = collections.Counter()
        for seg, (world, *_) in enumerate(SEGMENTS):
            for rank in range(world):
                text = (tmp_path / f"seen_{kind}_{seg}_rank{rank}.txt").read_text()
                counts.update(int(v) for v in text.split())
        if kind == "mix":
            assert counts == whole, "every position of the mixed epoch once"
        elif kind == "packed":
            assert counts == tokens, "every (document, token) of the packed epoch once"
        else:
            exactly_once(counts)


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(10))


class Augmented(torch.utils.data.Dataset):
    """A sample's draws from the three global streams."""

    def __len__(self):
        return 60

    def __getitem__(self, i):
        import random
        return torch.tensor([float(i), random.random(), float(np.random.rand()), float(torch.rand(()))],
                            dtype=torch.float64)


def draws(loader):
    return {int(row[0]): tuple(row[1:].tolist()) for b in loader for row in b}


def test_sample_seeds_make_each_samples_augmentation_independent_of_the_topology():
    ds = Augmented()
    base = draws(stoker.DataLoader(ds, batch_size=7, num_workers=0, sample_seeds=True, seed=11))
    assert len(base) == 60 and len(set(base.values())) == 60, "every sample its own draws"
    for workers, batch, shuffle in ((1, 5, False), (3, 8, True), (2, 60, True)):
        assert draws(stoker.DataLoader(ds, batch_size=batch, num_workers=workers, shuffle=shuffle,
                                       sample_seeds=True, seed=11)) == base, (workers, batch, shuffle)
    parts = {}
    for rank in range(3):
        parts.update(draws(stoker.DataLoader(ds, batch_size=4, num_workers=2, sample_seeds=True, seed=11,
                                             sampler=DistributedSampler(ds, num_replicas=3, rank=rank, seed=2))))
    assert parts == base, "on three ranks"
    other_seed = draws(stoker.DataLoader(ds, batch_size=7, num_workers=0, sample_seeds=True, seed=12))
    later = stoker.DataLoader(ds, batch_size=7, num_workers=2, sample_seeds=True, seed=11)
    later.set_epoch(1)
    assert all(other_seed[i] != base[i] for i in base) and all(v != base[i] for i, v in draws(later).items())
    # Off (the default): torch's per-worker streams, which depend on the worker.
    plain = [draws(stoker.DataLoader(ds, batch_size=5, num_workers=w, generator=torch.Generator().manual_seed(0)))
             for w in (1, 3)]
    assert plain[0] != plain[1]
    with pytest.raises(ValueError, match="sample_seeds=True seeds each sample from its index"):
        stoker.DataLoader(Stream(), sample_seeds=True)


def test_a_streaming_dataset_resumed_on_4_3_6_1_ranks_reads_every_sample_once(tmp_path):
    from stoker.io import write_tfrecord
    from stoker.streaming import StreamingDataset, write_index
    remote = tmp_path / "remote"
    remote.mkdir()
    n, per_shard = 2003, 100  # prime; the last shard short
    for s in range(0, n, per_shard):
        write_tfrecord(remote / f"shard-{s // per_shard:03d}.tfrecord",
                       ({"y": np.int64(i)} for i in range(s, min(n, s + per_shard))))
    write_index(str(remote))
    ds = StreamingDataset(str(remote), str(tmp_path / "cache"), max_bytes=0, features={"y": ("int64", ())})

    def make(world, rank, workers, batch):
        # (a StreamingDataset's epochs are read by C++ threads: num_workers counts them)
        return stoker.DataLoader(ds, batch_size=batch, num_workers=max(1, workers),
                                 sampler=ds.sampler(shuffle=True, seed=4, rank=rank, world_size=world, pad=True))

    def check(seg, state):
        order = state["order"]
        assert order["recipe"]["kind"] == "stream" and len(order["segments"]) == seg, order["segments"]
    counts, _ = run_segments(make, [(4, 3, 30, 2), (3, 2, 40, 1), (6, 5, 30, 1), (1, 0, 16, None)],
                             ids=lambda b: b["y"], check=check)
    exactly_once(counts, n)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loop_that_broke_out_still_has_its_position(workers):
    # `for batch in loader: ... break` lets go of the iterator: its workers stop,
    # and state_dict() is still where it stopped, not the epoch's start.
    ds = Samples(300)
    loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=workers)
    seen = []
    for k, b in enumerate(loader):
        seen += b.tolist()
        if k == 6:
            break
    import gc
    gc.collect()
    state = loader.state_dict()
    assert state["delivered"] == 7
    again = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=workers)
    again.load_state_dict(state)
    rest = [i for b in again for i in b.tolist()]
    assert sorted(seen + rest) == list(range(300))
    # An epoch that ended leaves no position: the next state is between epochs.
    whole = stoker.DataLoader(ds, batch_size=10, num_workers=workers)
    assert len([b for b in whole]) == 30
    gc.collect()
    assert whole.state_dict()["delivered"] == 0
    # Nor does a loop left mid-way once another epoch is set.
    for k, b in enumerate(whole):
        if k == 3:
            break
    gc.collect()
    whole.set_epoch(5)
    assert whole.state_dict()["delivered"] == 0
