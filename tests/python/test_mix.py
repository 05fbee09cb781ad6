"""stoker.Mix (issue 49, in part): sources mixed by weight, within one sample
of the weights at every prefix of the epoch, each source read once per
source-epoch, resumable on another topology like any map-style dataset."""
import collections
import os
import threading

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

import stoker
from test_elastic_resume import exactly_once, run_segments


class Source(torch.utils.data.Dataset):
    """Sample j of source s is (s, j)."""

    def __init__(self, s, n):
        self.s, self.n = s, n

    def __len__(self):
        return self.n

    def __getitem__(self, j):
        if not 0 <= j < self.n:
            raise IndexError(j)
        return torch.tensor([self.s, j])


def pairs(loader):
    return [tuple(row) for b in loader for row in b.tolist()]


def test_a_mixed_epoch_keeps_the_weights_at_every_prefix_and_reads_each_source_once():
    sources = [Source(0, 500), Source(1, 120), Source(2, 80)]
    mix = stoker.Mix(sources, [5, 3, 2], seed=7)
    assert len(mix) == 700
    got = pairs(stoker.DataLoader(mix, batch_size=32, shuffle=True, num_workers=2))
    assert len(got) == 700
    counts = collections.Counter()
    for n, (s, _j) in enumerate(got, 1):
        counts[s] += 1
        for i, w in enumerate((0.5, 0.3, 0.2)):
            assert abs(counts[i] - w * n) <= 1, (n, i, counts[i])
    per = collections.defaultdict(list)
    for s, j in got:
        per[s].append(j)
    assert len(per[0]) == 350 and len(set(per[0])) == 350  # within its first source-epoch: no repeat
    for s, size in ((1, 120), (2, 80)):  # took 210 and 140: cycled, each source-epoch whole
        assert sorted(per[s][:size]) == list(range(size)) and len(set(per[s][size:])) == len(per[s][size:])
    assert per[1][:120] != list(range(120)), "shuffled within the source-epoch"
    unshuffled = pairs(stoker.DataLoader(stoker.Mix(sources, [5, 3, 2], seed=7), batch_size=32))
    assert [j for s, j in unshuffled if s == 1][:120] == list(range(120))
    # The same order in every run and with any workers; another epoch, other shuffles.
    assert pairs(stoker.DataLoader(mix, batch_size=50, shuffle=True, num_workers=0)) == got
    loader = stoker.DataLoader(mix, batch_size=50, shuffle=True, num_workers=1)
    loader.set_epoch(1)
    other = pairs(loader)
    assert other != got and [s for s, _ in other] == [s for s, _ in got]


def test_stop_ends_the_epoch_before_a_source_runs_out_and_epoch_samples_sets_its_length():
    mix = stoker.Mix([Source(0, 50), Source(1, 10)], [1, 1], on_exhausted="stop")
    got = pairs(stoker.DataLoader(mix, batch_size=4))
    assert len(got) == len(set(got)) <= 20 and len(got) >= 18
    longer = stoker.Mix([Source(0, 50), Source(1, 10)], [1, 1], epoch_samples=90)
    assert len(pairs(stoker.DataLoader(longer, batch_size=8))) == 90


def test_a_mix_resumes_on_4_3_6_1_ranks_with_every_position_once():
    mix = stoker.Mix([Source(s, 101 + 37 * s) for s in range(6)], [1, 2, 3, 4, 5, 6], seed=3,
                     epoch_samples=3001)

    def make(world, rank, workers, batch):
        return stoker.DataLoader(mix, batch_size=batch, num_workers=workers, shuffle=True,
                                 sampler=DistributedSampler(mix, num_replicas=world, rank=rank, shuffle=False))
    positions = collections.Counter()
    whole = pairs(stoker.DataLoader(mix, batch_size=100, shuffle=True))
    where = {}
    for p, pair in enumerate(whole):
        where.setdefault(pair, []).append(p)
    counts, _ = run_segments(make, [(4, 2, 30, 3), (3, 1, 40, 2), (6, 2, 20, 1), (1, 0, 16, None)],
                             ids=lambda b: [hash(tuple(r)) for r in b.tolist()])
    # Every pair of the uninterrupted epoch as often as it is there.
    want = collections.Counter(hash(p) for p in whole)
    assert counts == want


def test_a_thousand_sources_cost_no_thread_and_little_memory():
    def run(k):
        sizes = [max(1, int(5000 / (i + 1) ** 1.1)) for i in range(k)]
        mix = stoker.Mix([Source(i, n) for i, n in enumerate(sizes)], [1 / (i + 1) ** 1.1 for i in range(k)],
                         epoch_samples=4000)
        loader = stoker.DataLoader(mix, batch_size=100, num_workers=1)
        it = iter(loader)
        got = pairs(it)
        threads, fds = threading.active_count(), len(os.listdir("/proc/self/fd"))
        return len(got), threads, fds, loader.stats()["tree_pss"]
    small, big = run(10), run(1000)
    assert small[0] == big[0] == 4000
    assert big[1] == small[1] and abs(big[2] - small[2]) <= 2
    assert big[3] - small[3] < 64 << 20


def test_bad_mixes_are_named():
    with pytest.raises(ValueError, match="2 weights for 3 sources"):
        stoker.Mix([Source(0, 3)] * 3, [1, 1])
    with pytest.raises(ValueError, match="source 1's weight is 0"):
        stoker.Mix([Source(0, 3), Source(1, 3)], [1, 0])
    with pytest.raises(ValueError, match="on_exhausted='never' is not one of 'cycle', 'stop'"):
        stoker.Mix([Source(0, 3)], [1], on_exhausted="never")
    with pytest.raises(TypeError, match="source 0 .* has no len"):
        stoker.Mix([iter(range(3))], [1])
    with pytest.raises(ValueError, match="shuffle='scalable' would shuffle a Mix's positions"):
        stoker.DataLoader(stoker.Mix([Source(0, 3)], [1]), shuffle="scalable")


def test_torchs_loader_reads_a_mix_by_position_in_the_same_order():
    mix = stoker.Mix([Source(0, 40), Source(1, 25)], [2, 1], seed=1)
    ours = pairs(stoker.DataLoader(mix, batch_size=8, num_workers=1))
    theirs = pairs(torch.utils.data.DataLoader(mix, batch_size=8, num_workers=2))
    assert ours == theirs == [tuple(mix[p].tolist()) for p in range(len(mix))]


def test_a_mix_of_native_datasets_is_read_by_cpp_threads(tmp_path):
    sources = []
    for s, n in enumerate((300, 90, 41)):
        np.save(tmp_path / f"s{s}.npy", np.stack([np.full(n, s), np.arange(n)], axis=1).astype(np.int64))
        sources.append(stoker.io.NpyDataset(tmp_path / f"s{s}.npy"))
    mix = stoker.Mix(sources, [6, 3, 1], seed=2)
    loader = stoker.DataLoader(mix, batch_size=20, shuffle=True, num_workers=2)
    got = [tuple(r) for b in loader for r in b.tolist()]
    assert loader.stats()["native"]["threads"] == 2  # no worker process, no Python per sample
    py = stoker.Mix([Source(s, n) for s, n in enumerate((300, 90, 41))], [6, 3, 1], seed=2)
    assert got == pairs(stoker.DataLoader(py, batch_size=20, shuffle=True, num_workers=1))
    np.save(tmp_path / "odd.npy", np.zeros((5, 3), np.float32))
    with pytest.raises(ValueError, match="source 1 .* has other fields than source 0"):
        stoker.DataLoader(stoker.Mix([sources[0], stoker.io.NpyDataset(tmp_path / "odd.npy")], [1, 1]))


def test_a_mixs_own_sampler_resumes_on_other_ranks():
    mix = stoker.Mix([Source(s, 57 + 31 * s) for s in range(5)], [5, 4, 3, 2, 1], seed=4, epoch_samples=2003)

    def make(world, rank, workers, batch):
        return stoker.DataLoader(mix, batch_size=batch, num_workers=workers, shuffle=True,
                                 sampler=stoker.mix.MixSampler(mix, shuffle=True, rank=rank, world_size=world))
    whole = collections.Counter(hash(p) for p in pairs(stoker.DataLoader(mix, batch_size=100, shuffle=True)))
    counts, state = run_segments(make, [(4, 2, 30, 3), (3, 1, 40, 2), (1, 0, 16, None)],
                                 ids=lambda b: [hash(tuple(r)) for r in b.tolist()])
    assert counts == whole
