"""shuffle=True at any size: torch's RandomSampler and DistributedSampler
orders drawn natively (the same indices, bit for bit, with no Python list),
and the scalable shuffle (a keyed permutation in O(1) memory)."""
import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DistributedSampler, RandomSampler

import stoker
from stoker import _native as N
from stoker import _sampling
from stoker.sampling import ScalableShuffleSampler

from datasets import IndexDataset as Indices


def native_randperm(n, generator):
    order = N.lib.torch_randperm(n, n, *_sampling._mt_of(generator), 0)
    return np.frombuffer(order.read(0, n), dtype=np.int64), order


# Sizes across randperm's code path for n < 2^32 / 20 and the generator's
# twists (624 words): tiny, around one twist, many twists; a first read past
# TorchRandperm::kAhead (2^21) draws on huge pages.
@pytest.mark.parametrize("n", [1, 2, 3, 17, 623, 624, 625, 1249, 100_003, 2_000_000, 3_000_000])
def test_randperm_equals_torch_bit_for_bit(n):
    g = torch.Generator().manual_seed(n)
    for _ in range(3):  # a generator mid-stream too: each call continues it
        ref_g = torch.Generator()
        ref_g.set_state(g.get_state())
        ref = torch.randperm(n, generator=ref_g).numpy()
        got, order = native_randperm(n, g)
        assert np.array_equal(got, ref)
        _sampling._set_mt(g, *order.final_generator_state())
        assert torch.equal(g.get_state(), ref_g.get_state()), "the generator continues where torch leaves it"


@pytest.mark.stress
def test_randperm_equals_torch_on_the_inside_out_path():
    """n >= 2^32 / 20: torch's other algorithm (random64, inside out); 1.7 GB
    for torch's tensor, run with `pytest -m stress`."""
    n = 0xFFFFFFFF // 20 + 5
    g = torch.Generator().manual_seed(11)
    got, _ = native_randperm(n, g)
    ref = torch.randperm(n, generator=torch.Generator().manual_seed(11)).numpy()
    assert np.array_equal(got, ref)


def batches(loader, epochs=2):
    out = []
    for e in range(epochs):
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(e)
        out.append([b.tolist() for b in loader])
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("with_generator", [False, True])
def test_shuffle_true_gives_torchs_batches_without_iterating_the_sampler(workers, with_generator, monkeypatch):
    ds = Indices(1000)
    gens = [torch.Generator().manual_seed(7) for _ in range(2)] if with_generator else [None, None]
    torch.manual_seed(3)
    ref = batches(torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, generator=gens[0]))
    ref_global = torch.random.get_rng_state()
    monkeypatch.setattr(RandomSampler, "__iter__", lambda self: (_ for _ in ()).throw(
        AssertionError("RandomSampler was iterated in Python")))
    torch.manual_seed(3)
    got = batches(stoker.DataLoader(ds, batch_size=32, shuffle=True, generator=gens[1], num_workers=workers))
    assert got == ref
    assert torch.equal(torch.random.get_rng_state(), ref_global), "torch's global generator drawn from as torch does"
    if with_generator:
        assert torch.equal(gens[1].get_state(), gens[0].get_state()), "the loader's generator left as torch leaves it"


def test_sampler_variants_torch_draws_the_same_way():
    ds = Indices(300)
    for make in (lambda g: RandomSampler(ds, num_samples=120, generator=g),  # a part of one permutation
                 lambda g: RandomSampler(ds, generator=g)):
        ref = [b for b in BatchSampler(make(torch.Generator().manual_seed(1)), 16, True)]
        got = [b.tolist() for b in stoker.DataLoader(ds, batch_size=16, drop_last=True, num_workers=2,
                                                      sampler=make(torch.Generator().manual_seed(1)))]
        assert got == ref
    # batch_size=None: one index at a time
    ref = list(RandomSampler(ds, generator=torch.Generator().manual_seed(2)))
    got = [int(x) for x in stoker.DataLoader(ds, batch_size=None, num_workers=2,
                                             sampler=RandomSampler(ds, generator=torch.Generator().manual_seed(2)))]
    assert got == ref


@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_samplers_give_torchs_rank_parts(drop_last, monkeypatch):
    ds = Indices(1001)
    for rank in range(3):
        ref_s = DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=True, seed=5, drop_last=drop_last)
        ref = [list(BatchSampler(_epoch(ref_s, e), 10, False)) for e in range(2)]
        got = batches(stoker.DataLoader(ds, batch_size=10, num_workers=2, sampler=DistributedSampler(
            ds, num_replicas=3, rank=rank, shuffle=True, seed=5, drop_last=drop_last)))
        assert got == ref, f"rank {rank}"
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "3")
        sharded = stoker.DataLoader(ds, batch_size=10, num_workers=2, distributed=True, shuffle=True, seed=5,
                                    even_split="drop" if drop_last else "pad")
        assert batches(sharded) == ref, f"distributed=True, rank {rank}"
        assert [list(BatchSampler(_epoch(sharded.sampler, e), 10, False)) for e in range(2)] == ref


def _epoch(sampler, e):
    sampler.set_epoch(e)
    return list(sampler)


def test_custom_samplers_keep_their_own_path():
    class Reversed(RandomSampler):
        def __iter__(self):
            return iter(range(len(self.data_source) - 1, -1, -1))
    ds = Indices(40)
    got = [b.tolist() for b in stoker.DataLoader(ds, batch_size=10, num_workers=2, sampler=Reversed(ds))]
    assert got == [list(range(39 - 10 * k, 29 - 10 * k, -1)) for k in range(4)]


def test_resume_mid_epoch_with_shuffle_true_is_exact():
    ds = Indices(500)
    torch.manual_seed(9)
    loader = stoker.DataLoader(ds, batch_size=20, shuffle=True, num_workers=2)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(7)]
    state = loader.state_dict()
    rest = [b.tolist() for b in it]
    assert len(pickle.dumps(state)) < 40_000
    again = stoker.DataLoader(ds, batch_size=20, shuffle=True, num_workers=2)
    again.load_state_dict(state)
    assert [b.tolist() for b in again] == rest
    assert sorted(sum(head + rest, [])) == list(range(500))


def test_state_stays_small_at_scale():
    """state_dict() does not grow with the dataset (a permutation is never
    saved: the generator state that draws it is)."""
    sizes = []
    for n in (100_000, 20_000_000):
        loader = stoker.DataLoader(Indices(n), batch_size=256, shuffle=True, num_workers=2)
        it = iter(loader)
        for _ in range(4):
            next(it)
        sizes.append(len(pickle.dumps(loader.state_dict())))
        del it, loader
    assert abs(sizes[1] - sizes[0]) < 200, sizes
    assert sizes[1] < 64_000, sizes


# ---- the scalable shuffle ----------------------------------------------------------------

def test_scalable_shuffle_every_index_once_new_order_each_epoch_same_for_the_same_seed():
    ds = Indices(1000)
    a = batches(stoker.DataLoader(ds, batch_size=50, shuffle="scalable", seed=4, num_workers=2), epochs=3)
    b = batches(stoker.DataLoader(ds, batch_size=50, shuffle="scalable", seed=4, num_workers=0), epochs=3)
    c = batches(stoker.DataLoader(ds, batch_size=50, shuffle="scalable", seed=5, num_workers=2), epochs=1)
    assert a == b, "workers or not: the same order"
    for epoch in a:
        assert sorted(sum(epoch, [])) == list(range(1000))
    assert a[0] != a[1] != a[2] and a[0] != c[0]


def test_scalable_shuffle_ranks_are_disjoint_and_resume_is_exact(monkeypatch):
    ds = Indices(1003)
    parts = []
    for rank in range(4):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "4")
        loader = stoker.DataLoader(ds, batch_size=25, shuffle="scalable", seed=1, distributed=True,
                                   even_split="drop", num_workers=2)
        parts.append(sum(batches(loader, epochs=1)[0], []))
    assert all(len(p) == 1003 // 4 for p in parts)
    flat = sum(parts, [])
    assert len(set(flat)) == len(flat)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    loader = stoker.DataLoader(ds, batch_size=25, shuffle="scalable", seed=2, num_workers=2)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(5)]
    state = loader.state_dict()
    rest = [b.tolist() for b in it]
    again = stoker.DataLoader(ds, batch_size=25, shuffle="scalable", seed=2, num_workers=2)
    again.load_state_dict(state)
    assert [b.tolist() for b in again] == rest
    assert sorted(sum(head + rest, [])) == list(range(1003))


def test_scalable_shuffle_at_ten_billion_samples():
    s = ScalableShuffleSampler(10_000_000_000, seed=3)
    it = iter(s)
    first = [next(it) for _ in range(1000)]
    assert len(set(first)) == 1000 and all(0 <= i < 10_000_000_000 for i in first)
    assert s.index(999, epoch=0) == first[999]
    assert len(pickle.dumps(s)) < 1000


def test_scalable_shuffle_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="pass no sampler"):
        stoker.DataLoader(Indices(10), shuffle="scalable", sampler=range(10))
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(ValueError, match="map-style"):
        stoker.DataLoader(Stream(), shuffle="scalable")
    with pytest.raises(ValueError, match="rank 4 is not in"):
        ScalableShuffleSampler(10, num_replicas=4, rank=4)


def test_an_epoch_left_early_leaves_the_generator_where_torch_does():
    ds = Indices(400)
    g_ref, g = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    ref_loader = torch.utils.data.DataLoader(ds, batch_size=10, shuffle=True, generator=g_ref)
    loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, generator=g, num_workers=2)
    for _ in range(2):  # two epochs left after 3 batches, then a whole one
        assert [b.tolist() for _, b in zip(range(3), loader)] == [b.tolist() for _, b in zip(range(3), ref_loader)]
    import copy
    copy.deepcopy(loader)  # (what is pending is this process's: a copy carries none)
    assert [b.tolist() for b in loader] == [b.tolist() for b in ref_loader]
    assert torch.equal(g.get_state(), g_ref.get_state())
