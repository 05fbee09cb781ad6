"""stoker.Mix (issue 49, in part): sources mixed by weight, within one sample
of the weights at every prefix of the epoch, each source read once per
source-epoch, resumable on another topology like any map-style dataset."""
import collections
import os
import subprocess
import sys

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


THOUSAND = """
import os, sys, threading
sys.path.insert(0, {here!r})
import stoker
from test_mix import Source, pairs
k = int(sys.argv[1])
sizes = [max(1, int(5000 / (i + 1) ** 1.1)) for i in range(k)]
mix = stoker.Mix([Source(i, n) for i, n in enumerate(sizes)], [1 / (i + 1) ** 1.1 for i in range(k)],
                 epoch_samples=4000)
loader = stoker.DataLoader(mix, batch_size=100, num_workers=1)
it = iter(loader)
got = pairs(it)
print(len(got), threading.active_count(), len(os.listdir("/proc/self/fd")), loader.stats()["tree_pss"])
"""


def test_a_thousand_sources_cost_no_thread_and_little_memory():
    def run(k):
        # (each in a process of its own: the memory of the tests before it,
        # and a loader of theirs let go while this one runs, are not counted)
        code = THOUSAND.format(here=os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run([sys.executable, "-c", code, str(k)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        return [int(v) for v in out.stdout.split()[-4:]]
    small, big = run(10), run(1000)
    assert small[0] == big[0] == 4000
    assert big[1] == small[1] and abs(big[2] - small[2]) <= 2
    assert big[3] - small[3] < 64 << 20
    # ... and it resumes on another topology exactly: 2 ranks stop, 3 go on.
    sizes = [max(1, int(5000 / (i + 1) ** 1.1)) for i in range(1000)]
    mix = stoker.Mix([Source(i, n) for i, n in enumerate(sizes)], [1 / (i + 1) ** 1.1 for i in range(1000)],
                     epoch_samples=4000, seed=1)
    whole = collections.Counter(pairs(stoker.DataLoader(mix, batch_size=100, shuffle=True)))
    before, state = rank_batches(mix_loader(mix, 50), 2, None, stop=7)
    assert len(state["order"]["recipe"]["at_counts"]) == 1000 and state["order"]["recipe"]["at"] == 700
    after, _ = rank_batches(mix_loader(mix, 64, workers=0), 3, state)
    got = collections.Counter(p for part in before + after for p in part)
    assert not whole - got, "no position lost"
    pad = sum(got.values()) - 4000  # (3 ranks pad the rest's last step by repeating its start)
    assert 0 <= pad < 3 and sum((got - whole).values()) == pad


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


def rank_batches(make, world, state, stop=None):
    """Each rank's samples (loaded from `state`, up to `stop` batches) and
    rank 0's state after them."""
    per, states = [], []
    for rank in range(world):
        loader = make(world, rank)
        if state is not None:
            loader.load_state_dict(state)
        got = []
        for k, b in enumerate(loader):
            got += [tuple(r) for r in b.tolist()]
            if k + 1 == stop:
                break
        per.append(got)
        states.append(loader.state_dict())
    return per, states[0]


def strided(per):
    """The global order the ranks' strided parts came from (padding included)."""
    world = len(per)
    return [per[q % world][q // world] for q in range(world * len(per[0]))]


SIZES = {"a": 300, "b": 200, "c": 150, "d": 100}


def named(weights, seed=5):
    return stoker.Mix({n: Source("abcd".index(n), SIZES[n]) for n in weights}, weights, seed=seed)


def mix_loader(mix, batch, workers=1):
    def make(world, rank):
        return stoker.DataLoader(mix, batch_size=batch, num_workers=workers, shuffle=True,
                                 sampler=stoker.mix.MixSampler(mix, shuffle=True, rank=rank, world_size=world))
    return make


def test_new_weights_at_a_resume_hold_from_the_change_and_kept_sources_go_on_from_their_place():
    old = named({"a": 1, "b": 1, "c": 2})
    before, state = rank_batches(mix_loader(old, 20), 2, None, stop=4)
    assert state["order"]["recipe"]["at"] == 160 and sum(state["order"]["recipe"]["at_counts"]) == 160
    # b removed, d added, new weights; on 3 ranks with another batch size.
    new = named({"a": 3, "c": 1, "d": 1})
    rest_per, _ = rank_batches(mix_loader(new, 10, workers=2), 3, state)
    again, _ = rank_batches(mix_loader(new, 10, workers=0), 3, state)
    assert again == rest_per, "the rest is a function of the state"
    n = 300 + 150 + 100 - 160  # the new epoch's length less the positions done
    rest = strided(rest_per)[:n]
    counts = collections.Counter()
    for p, (s, _j) in enumerate(rest, 1):
        counts[s] += 1
        for i, w in ((0, 0.6), (2, 0.2), (3, 0.2)):
            assert abs(counts[i] - w * p) <= 1, (p, i, counts[i])
    assert counts[1] == 0, "a removed source is gone"
    done = collections.defaultdict(set)
    for s, j in (pair for part in before for pair in part):
        done[s].add(j)
    assert len(done[0]) + len(done[1]) + len(done[2]) == 160
    for s, size in ((0, 300), (2, 150)):
        after = [j for t, j in rest if t == s][:size - len(done[s])]
        assert len(set(after)) == len(after) and not set(after) & done[s], f"source {s} repeats within its epoch"
    new_source = [j for t, j in rest if t == 3]
    assert len(new_source) == 78 and len(set(new_source)) == 78  # a new source: its first source-epoch


def test_a_changed_mix_resumes_again_on_another_topology_exactly():
    old = named({"a": 1, "b": 1, "c": 2})
    _, state = rank_batches(mix_loader(old, 20), 2, None, stop=3)
    new = named({"a": 3, "c": 1, "d": 1})
    whole = [p for part in rank_batches(mix_loader(new, 7), 1, state)[0] for p in part]
    first, state2 = rank_batches(mix_loader(new, 10), 3, state, stop=2)
    assert state2["order"]["recipe"]["start"] == 120 and len(state2["order"]["recipe"]["base"]) == 3
    second, _ = rank_batches(mix_loader(new, 16, workers=0), 1, state2)
    got = collections.Counter(p for part in first + second for p in part)
    assert got == collections.Counter(whole)


def test_changes_a_mix_cannot_go_on_from_are_named():
    old = named({"a": 1, "b": 1, "c": 2})
    _, state = rank_batches(mix_loader(old, 20), 2, None, stop=2)
    grown = stoker.Mix({"a": Source(0, 301), "c": Source(2, 150)}, {"a": 1, "c": 1})
    with pytest.raises(ValueError, match="source 'a' of the Mix had 300 samples when the state was saved and has 301"):
        rank_batches(mix_loader(grown, 10), 1, state)
    stop = stoker.Mix({"a": Source(0, 300)}, {"a": 1}, on_exhausted="stop")
    with pytest.raises(ValueError, match="differ in on_exhausted"):
        rank_batches(mix_loader(stop, 10), 1, state)
    bad = dict(state, order=dict(state["order"], recipe=dict(state["order"]["recipe"], exact=False)))
    with pytest.raises(ValueError, match="past its first undelivered one"):
        rank_batches(mix_loader(named({"a": 1}), 10), 1, bad)
    with pytest.raises(ValueError, match="the sources and the weights name different sources: \\['x'\\]"):
        stoker.Mix({"a": Source(0, 3)}, {"a": 1, "x": 2})


class Values(torch.utils.data.Dataset):
    """{"y": values[j]}: a Python source with a streaming source's samples."""

    def __init__(self, values):
        self.values = values

    def __len__(self):
        return len(self.values)

    def __getitem__(self, j):
        return {"y": torch.tensor(self.values[j])}


def test_a_mix_of_streaming_datasets_reads_as_the_same_mix_of_python_sources_and_resumes_elsewhere(tmp_path):
    from stoker.io import write_tfrecord
    from stoker.streaming import StreamingDataset, write_index

    def remote(name, start, n, per=50):
        r = tmp_path / name
        r.mkdir()
        for s in range(0, n, per):
            write_tfrecord(r / f"shard-{s // per:03d}.tfrecord",
                           ({"y": np.int64(start + i)} for i in range(s, min(n, s + per))))
        write_index(str(r))
        return str(r)
    # One streamed through memory, one through a cache.
    a = StreamingDataset(remote("a", 0, 503), str(tmp_path / "ca"), max_bytes=0, features={"y": ("int64", ())})
    b = StreamingDataset(remote("b", 10000, 301), str(tmp_path / "cb"), max_bytes=1 << 30,
                         features={"y": ("int64", ())})
    mix = stoker.Mix([a, b], [2, 1], seed=1)
    got = [int(v) for bt in stoker.DataLoader(mix, batch_size=50, shuffle=True, num_workers=2) for v in bt["y"]]
    same = stoker.Mix([Values(list(range(503))), Values(list(range(10000, 10301)))], [2, 1], seed=1)
    assert got == [int(v) for bt in stoker.DataLoader(same, batch_size=50, shuffle=True) for v in bt["y"]]
    assert len(got) == 804 and len(set(got)) == 503 + 268  # a cycled (536 of 503), b took 268 of 301

    def make(world, rank, workers, batch):
        return stoker.DataLoader(mix, batch_size=batch, num_workers=max(1, workers), shuffle=True,
                                 sampler=stoker.mix.MixSampler(mix, shuffle=True, rank=rank, world_size=world))
    counts, _ = run_segments(make, [(3, 2, 40, 2), (2, 1, 30, 3), (1, 0, 16, None)], ids=lambda b: b["y"])
    assert counts == collections.Counter(got)
