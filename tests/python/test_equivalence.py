"""stoker.DataLoader yields exactly what torch.utils.data.DataLoader yields."""
import itertools
import time

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader as TorchLoader, SequentialSampler, SubsetRandomSampler, \
    WeightedRandomSampler

import stoker
from datasets import (Batch, IndexDataset, RichDataset, ShardedIterable, UnevenIterable, custom_collate)
from helpers import assert_same


def both(dataset, **kw):
    seed = kw.pop("seed", None)
    gens = [None, None] if seed is None else [torch.Generator().manual_seed(seed) for _ in range(2)]
    t = list(TorchLoader(dataset, generator=gens[0], **kw))
    s = list(stoker.DataLoader(dataset, generator=gens[1], **kw))
    return t, s


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size,shuffle,drop_last",
                         [c for c in itertools.product([1, 7, None], [False, True], [False, True])
                          if not (c[0] is None and c[2])])
def test_matrix_matches_torch(num_workers, batch_size, shuffle, drop_last):
    t, s = both(RichDataset(23), batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                num_workers=num_workers, seed=11)
    assert len(t) == len(s)
    for i, (a, b) in enumerate(zip(t, s)):
        assert_same(a, b, f"batch {i}")


@pytest.mark.parametrize("num_workers", [0, 2])
def test_samplers_match_torch(num_workers):
    ds = IndexDataset(50)

    def cases():  # fresh samplers, each with its own seeded generator
        g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
        return [
            dict(sampler=SubsetRandomSampler(list(range(0, 50, 3)), generator=g()), batch_size=4),
            dict(sampler=WeightedRandomSampler([1.0] * 25 + [3.0] * 25, 40, generator=g()), batch_size=5,
                 drop_last=True),
            dict(batch_sampler=BatchSampler(SequentialSampler(range(50)), 6, False)),
            dict(batch_sampler=[[3, 1], [4, 1, 5], [9]]),
        ]

    for kw_t, kw_s in zip(cases(), cases()):
        t = list(TorchLoader(ds, num_workers=num_workers, **kw_t))
        s = list(stoker.DataLoader(ds, num_workers=num_workers, **kw_s))
        assert len(t) == len(s) > 0
        for a, b in zip(t, s):
            assert_same(a, b)


def test_len_matches_torch():
    for kw in [dict(batch_size=7), dict(batch_size=7, drop_last=True), dict(batch_size=None),
               dict(batch_size=3, shuffle=True)]:
        assert len(stoker.DataLoader(IndexDataset(50), **kw)) == len(TorchLoader(IndexDataset(50), **kw))


@pytest.mark.parametrize("kw", [
    dict(batch_sampler=[[0]], shuffle=True),
    dict(batch_sampler=[[0]], batch_size=2),
    dict(sampler=[0, 1], shuffle=True),
    dict(num_workers=-1),
    dict(prefetch_factor=2),
    dict(persistent_workers=True),
    dict(timeout=-1),
    dict(batch_size=None, drop_last=True),
])
def test_invalid_arguments_fail_like_torch(kw):
    with pytest.raises(Exception) as t_err:
        TorchLoader(IndexDataset(4), **kw)
    with pytest.raises(type(t_err.value)) as s_err:
        stoker.DataLoader(IndexDataset(4), **kw)
    assert str(s_err.value) == str(t_err.value)


def test_stoker_arguments_are_validated():
    with pytest.raises(ValueError, match="max_memory"):
        stoker.DataLoader(IndexDataset(4), max_memory=10)
    with pytest.raises(ValueError, match="output"):
        stoker.DataLoader(IndexDataset(4), output="jax")


@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_iterable_sharded_by_worker_info_matches_torch(num_workers):
    for bs in (4, None):
        t, s = both(ShardedIterable(37), batch_size=bs, num_workers=num_workers)
        assert len(t) == len(s)
        for a, b in zip(t, s):
            assert_same(a, b)


def test_iterable_uneven_workers_match_torch():
    for drop_last in (False, True):
        t, s = both(UnevenIterable(), batch_size=3, num_workers=3, drop_last=drop_last)
        assert [x.tolist() for x in t] == [x.tolist() for x in s]


def test_custom_collate_fn_objects_cross_with_tensors_inside():
    t, s = both(IndexDataset(20), batch_size=6, num_workers=2, collate_fn=custom_collate)
    for a, b in zip(t, s):
        assert isinstance(b, Batch)
        assert_same(a.x, b.x)
        assert a.names == b.names


def test_collate_fn_returning_numpy_and_tuples_is_preserved():
    import numpy as np

    def collate(samples):
        return (np.stack([s.numpy() for s in samples]), tuple(int(s) for s in samples))

    t, s = both(IndexDataset(10), batch_size=4, num_workers=2, collate_fn=collate)
    for a, b in zip(t, s):
        assert isinstance(b, tuple) and isinstance(b[0], np.ndarray)
        assert np.array_equal(a[0], b[0]) and a[1] == b[1]


def test_default_collate_errors_match_torch():
    class Ragged(IndexDataset):
        def __getitem__(self, i):
            return torch.zeros(i + 1)

    for cls in (Ragged,):
        with pytest.raises(RuntimeError) as t_err:
            list(TorchLoader(cls(4), batch_size=2))
        with pytest.raises(RuntimeError) as s_err:
            list(stoker.DataLoader(cls(4), batch_size=2, num_workers=2))
        assert str(t_err.value).splitlines()[-1] in str(s_err.value)


class SlowFirst(IndexDataset):
    def __getitem__(self, i):
        if i == 0:
            time.sleep(1.0)
        return torch.tensor(i)


def test_in_order_false_does_not_wait_for_a_slow_sample():
    loader = stoker.DataLoader(SlowFirst(12), batch_size=1, num_workers=2, in_order=False)
    got = [int(b) for b in loader]
    assert sorted(got) == list(range(12))
    assert got[0] != 0, "a slow sample held back the others"
    ordered = [int(b) for b in stoker.DataLoader(SlowFirst(12), batch_size=1, num_workers=2)]
    assert ordered == list(range(12))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the behaviour without CUDA (with it: test_cuda.py)")
def test_pin_memory_without_cuda_behaves_like_torch():
    with pytest.warns(UserWarning, match="pin_memory"):
        t = list(TorchLoader(IndexDataset(6), batch_size=2, pin_memory=True, num_workers=2))
    with pytest.warns(UserWarning, match="pin_memory"):
        s = list(stoker.DataLoader(IndexDataset(6), batch_size=2, pin_memory=True, num_workers=2))
    for a, b in zip(t, s):
        assert_same(a, b)


class FailingSampler(torch.utils.data.Sampler):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield i
        raise KeyError("sampler broke")

    def __len__(self):
        return self.n + 1


@pytest.mark.parametrize("num_workers", [0, 2])
def test_sampler_exception_surfaces_after_the_batches_before_it(num_workers):
    loader = stoker.DataLoader(IndexDataset(10), batch_size=2, sampler=FailingSampler(6), num_workers=num_workers)
    got = []
    with pytest.raises(KeyError, match="sampler broke"):
        for b in loader:
            got.append(b.tolist())
    assert got == [[0, 1], [2, 3], [4, 5]]


def test_the_class_is_generic_like_torchs():
    import typing
    alias = stoker.DataLoader[int]
    assert typing.get_origin(alias) is stoker.DataLoader and typing.get_args(alias) == (int,)


def _unpicklable_init(worker_id, _lock=None):
    pass


def test_an_unpicklable_worker_argument_under_forkserver_gives_torchs_warning():
    import functools
    import threading
    init = functools.partial(_unpicklable_init, _lock=threading.Lock())  # a lock cannot be pickled
    loader = stoker.DataLoader(list(range(8)), batch_size=2, num_workers=2, worker_init_fn=init,
                               multiprocessing_context="forkserver")
    with pytest.warns(UserWarning, match="Got pickle error when attempting to start a worker Process"):
        with pytest.raises((TypeError, AttributeError, __import__("pickle").PicklingError)):
            next(iter(loader))


def test_a_class_that_cannot_be_pickled_is_fine_without_workers():
    """torch never pickles with num_workers=0; a namedtuple made in a function
    (or bound to another name) cannot be pickled, and stoker's slot stored its
    class as a pickle."""
    import collections
    point = collections.namedtuple("Point", ["x", "y"])

    class Local(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return point(torch.tensor(i), torch.tensor(2 * i))

    got = list(stoker.DataLoader(Local(), batch_size=4))
    want = list(TorchLoader(Local(), batch_size=4))
    assert [type(b) for b in got] == [point, point]
    for a, b in zip(got, want):
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    with pytest.raises(AttributeError, match="no_such"):  # other AttributeErrors are the dataset's own
        list(stoker.DataLoader(Local(), batch_size=4, collate_fn=lambda s: s.no_such))


@pytest.mark.parametrize("num_workers,persistent", [(0, False), (1, True), (2, False), (2, True)])
def test_datapipe_shuffle_and_sharding_match_torch(num_workers, persistent):
    # torch seeds a datapipe's shuffle with one seed per epoch that every
    # worker shares (persistent workers get each epoch's with the resume) and
    # shards it between workers: the same items in the same order, epoch after
    # epoch, and the global random state left as torch leaves it.
    import torch.utils.data.datapipes as dp

    def epochs(cls):
        pipe = dp.iter.IterableWrapper(range(60)).shuffle(buffer_size=7).sharding_filter()
        loader = cls(pipe, batch_size=4, shuffle=True, num_workers=num_workers, persistent_workers=persistent)
        torch.manual_seed(5)
        out = [[b.tolist() for b in loader] for _ in range(3)]
        return out, torch.rand(1).item()

    (t, t_after), (s, s_after) = epochs(TorchLoader), epochs(stoker.DataLoader)
    assert s == t
    assert s_after == t_after
    assert sorted(sum(s[0], [])) == list(range(60))
    assert s[0] != s[1]  # each epoch shuffles anew
