"""Exact mid-epoch resume (state_dict / load_state_dict) and the
distributed mode."""
import io
import os
import pickle

import pytest
import torch
from torch.utils.data import DistributedSampler

import stoker
from datasets import IndexDataset, ShardedIterable


def roundtrip(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def make(kind, workers, persistent, in_order, seed, n=103):
    ds = IndexDataset(n)
    common = dict(batch_size=4, num_workers=workers, persistent_workers=persistent and workers > 0,
                  in_order=in_order)
    if kind == "generator":
        return stoker.DataLoader(ds, shuffle=True, generator=torch.Generator().manual_seed(seed), **common)
    if kind == "global":
        torch.manual_seed(seed)
        return stoker.DataLoader(ds, shuffle=True, **common)
    if kind == "distributed":
        return stoker.DataLoader(ds, sampler=DistributedSampler(ds, num_replicas=2, rank=1, seed=seed), **common)
    return stoker.DataLoader(ds, shuffle=False, **common)


def epoch_batches(loader, epoch):
    loader.set_epoch(epoch)
    return [b.tolist() for b in loader]


CASES = [("generator", 2, False, True), ("generator", 2, True, True), ("generator", 0, False, True),
         ("global", 2, False, True), ("distributed", 2, True, True), ("sequential", 2, False, True),
         ("generator", 2, False, False), ("generator", 2, True, False)]


@pytest.mark.parametrize("kind,workers,persistent,in_order", CASES)
def test_resume_yields_exactly_what_the_uninterrupted_run_would(kind, workers, persistent, in_order):
    full = make(kind, workers, persistent, in_order, seed=7)
    expected = [epoch_batches(full, 0), epoch_batches(full, 1)]
    for stop_at in (0, 1, 9, len(expected[0]) - 1):
        run = make(kind, workers, persistent, in_order, seed=7)
        run.set_epoch(0)
        it = iter(run)
        before = [next(it).tolist() for _ in range(stop_at)]
        state = roundtrip(run.state_dict())
        # No data: the order's random state, counts, and each worker's random
        # state (three Mersenne Twisters, about 10 KB a worker).
        assert len(pickle.dumps(state)) < 20_000 + 11_000 * workers, "the state carries no data"
        del it, run
        # A new loader, built with another seed: the state decides the order.
        resumed = make(kind, workers, persistent, in_order, seed=12345)
        resumed.load_state_dict(state)
        rest = [b.tolist() for b in resumed]
        after = epoch_batches(resumed, 1)
        if in_order:
            assert before + rest == expected[0], f"stopped at {stop_at}"
        else:  # out of order: every batch of the epoch exactly once
            assert sorted(before + rest) == sorted(expected[0]), f"stopped at {stop_at}"
        assert sorted(after) == sorted(expected[1]) if not in_order else after == expected[1]


def test_resume_with_another_num_workers():
    full = make("generator", 2, False, True, seed=3)
    expected = epoch_batches(full, 0)
    for workers in (0, 1, 3):
        run = make("generator", 2, False, True, seed=3)
        it = iter(run)
        before = [next(it).tolist() for _ in range(5)]
        state = run.state_dict()
        del it
        resumed = make("generator", workers, False, True, seed=99)
        resumed.load_state_dict(state)
        assert before + [b.tolist() for b in resumed] == expected, f"num_workers {workers}"


def test_state_checked_before_use():
    loader = make("generator", 2, False, True, seed=1)
    with pytest.raises(ValueError, match="not a stoker.DataLoader state"):
        loader.load_state_dict({"epoch": 3})
    it_loader = stoker.DataLoader(ShardedIterable(40), batch_size=4, num_workers=2)
    it = iter(it_loader)
    next(it)
    state = it_loader.state_dict()
    with pytest.raises(ValueError, match="map-style"):
        loader.load_state_dict(state)
    with pytest.raises(ValueError, match="num_workers=2, and this loader has num_workers=1"):
        stoker.DataLoader(ShardedIterable(40), batch_size=4, num_workers=1).load_state_dict(state)


def test_distributed_mode_splits_evenly_and_shuffles_per_epoch(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    seen = {}
    for even in ("pad", "drop"):
        for rank in range(3):
            monkeypatch.setenv("RANK", str(rank))
            loader = stoker.DataLoader(IndexDataset(100), batch_size=5, shuffle=True, num_workers=2,
                                       distributed=True, seed=4, even_split=even)
            assert (loader.rank, loader.world_size) == (rank, 3)
            e0 = torch.cat(epoch_batches_t(loader, 0)).tolist()
            e1 = torch.cat(epoch_batches_t(loader, 1)).tolist()
            assert e0 != e1, "a new order each epoch"
            seen[(even, rank)] = e0
        pad = [seen[("pad", r)] for r in range(3)]
        drop = [seen[("drop", r)] for r in range(3)] if even == "drop" else None
    assert all(len(p) == 34 for p in pad) and sorted(set(sum(pad, []))) == list(range(100))
    assert all(len(d) == 33 for d in drop) and len(set(sum(drop, []))) == 99, "drop: disjoint, the tail dropped"
    with pytest.raises(ValueError, match="builds the sampler"):
        stoker.DataLoader(IndexDataset(10), distributed=True, sampler=range(10))
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(ValueError, match=r"RANK=5 is not in \[0, WORLD_SIZE=3\)"):
        stoker.DataLoader(IndexDataset(10), distributed=True)


def epoch_batches_t(loader, epoch):
    loader.set_epoch(epoch)
    return list(loader)


class RankSharded(torch.utils.data.IterableDataset):
    def __iter__(self):
        from stoker.distributed import shard
        for i in shard(list(range(60))):
            yield torch.tensor(i)


def test_iterable_dataset_shards_across_ranks_then_workers(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    parts = []
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        loader = stoker.DataLoader(RankSharded(), batch_size=None, num_workers=3, distributed=True)
        parts.append(sorted(int(x) for x in loader))
    assert not set(parts[0]) & set(parts[1]) and sorted(parts[0] + parts[1]) == list(range(60))


class Stream(torch.utils.data.IterableDataset):
    """Uneven per-worker streams: worker w yields its share of range(n)."""

    def __init__(self, n=57):
        self.n = n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        for i in range(wid, self.n, nw):
            yield torch.tensor(i)


@pytest.mark.parametrize("workers,persistent", [(2, False), (3, True), (0, False)])
def test_iterable_dataset_resumes_mid_epoch_with_the_same_num_workers(workers, persistent):
    def make_it():
        return stoker.DataLoader(Stream(), batch_size=4, num_workers=workers, persistent_workers=persistent)

    full = make_it()
    expected = [b.tolist() for b in full]
    for stop_at in (1, 5, len(expected) - 2):
        run = make_it()
        it = iter(run)
        before = [next(it).tolist() for _ in range(stop_at)]
        state = roundtrip(run.state_dict())
        del it, run
        resumed = make_it()
        resumed.load_state_dict(state)
        it = iter(resumed)
        middle = [next(it).tolist()]  # a second interruption, in the resumed epoch
        state = roundtrip(resumed.state_dict())
        del it, resumed
        again = make_it()
        again.load_state_dict(state)
        assert before + middle + [b.tolist() for b in again] == expected, f"stopped at {stop_at}"
    if workers:
        with pytest.raises(ValueError, match="same num_workers"):
            stoker.DataLoader(Stream(), batch_size=4, num_workers=workers + 1).load_state_dict(state)


@pytest.mark.parametrize("n,world,drop", [(100, 3, False), (100, 3, True), (5, 8, False), (64, 2, False),
                                          (7, 3, True)])
def test_sharded_sampler_matches_torchs_distributed_sampler(n, world, drop):
    from stoker.distributed import sharded_sampler
    ds = IndexDataset(n)
    for rank in range(world):
        for shuffle in (True, False):
            ours = sharded_sampler(ds, world, rank, shuffle, 5, drop)
            theirs = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=shuffle, seed=5, drop_last=drop)
            for epoch in (0, 3):
                ours.set_epoch(epoch)
                theirs.set_epoch(epoch)
                assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_resuming_again_keeps_batches_delivered_out_of_order():
    # A state with batches 5 and 7 delivered ahead of the prefix (as in_order=False
    # leaves it), resumed without workers, saved again after one batch, resumed again:
    # 5 and 7 must still never come back.
    full = make("sequential", 0, False, True, seed=0)
    expected = [b.tolist() for b in full]
    run = make("sequential", 0, False, True, seed=0)
    state = dict(run.state_dict(), delivered=2, delivered_extra=[5, 7])
    first = make("sequential", 0, False, True, seed=0)
    first.load_state_dict(state)
    it = iter(first)
    got = [next(it).tolist()]
    state2 = first.state_dict()
    assert state2["delivered"] == 3 and state2["delivered_extra"] == [5, 7]
    del it
    second = make("sequential", 2, False, True, seed=0)
    second.load_state_dict(state2)
    got += [b.tolist() for b in second]
    assert got == [b for i, b in enumerate(expected) if i not in (0, 1, 5, 7)]
