"""A StreamingDataset read in worker processes: stream[i] under a user's
Python Dataset (an augmentation), and StreamingDataset(transform=), in
forked and spawned workers of stoker.DataLoader and of torch's DataLoader,
reading the node's shared cache and fetching shards on demand."""
import os

import numpy as np
import pytest
import torch

import stoker
from stoker.cache import StreamingDataset, write_index
from stoker.io import write_tfrecord
from nginx import Nginx

FEATURES = {"x": ("float32", (8,)), "y": ("int64", ())}
SHARDS, PER_SHARD = 6, 40
N = SHARDS * PER_SHARD


class Augment(torch.utils.data.Dataset):
    """What users write: a Python Dataset over the stream, a random
    augmentation drawn from the worker's generator."""

    def __init__(self, stream):
        self.stream = stream

    def __len__(self):
        return len(self.stream)

    def __getitem__(self, i):
        r = self.stream[i]
        noise = torch.rand(()).item()  # the worker's seeded torch generator
        return {"x": torch.from_numpy(r["x"]) * 2 + noise, "y": int(r["y"]), "noise": noise, "pid": os.getpid()}


def plus_one(r):
    r["x"] = r["x"] + 1
    return r


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("remote"))
    for s in range(SHARDS):
        write_tfrecord(os.path.join(root, f"shard-{s}.tfrecord"),
                       [{"x": np.full(8, i, np.float32), "y": np.int64(i)} for i in range(s * PER_SHARD, (s + 1) * PER_SHARD)])
    write_index(root)
    return root


@pytest.fixture(scope="module")
def server(remote, tmp_path_factory):
    n = Nginx(tmp_path_factory.mktemp("nginx"), remote).start()
    yield n
    n.stop()


@pytest.mark.parametrize("loader_cls", [torch.utils.data.DataLoader, stoker.DataLoader], ids=["torch", "stoker"])
@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_a_python_dataset_over_the_stream_in_worker_processes(server, tmp_path, loader_cls, ctx):
    stream = StreamingDataset(server.url, str(tmp_path / "cache"), max_bytes=1 << 30, mode="full", features=FEATURES)
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(7)
        batches = list(loader_cls(Augment(stream), batch_size=16, shuffle=True, num_workers=2, generator=g,
                                  multiprocessing_context=ctx))
        ys = [y for b in batches for y in b["y"].tolist()]
        assert sorted(ys) == list(range(N))
        for b in batches:  # each sample's bytes, from the shard that holds it
            assert torch.allclose(b["x"][:, 0], 2 * b["y"].float() + b["noise"].float())
        pids = {p for b in batches for p in b["pid"].tolist()}
        assert len(pids) == 2 and os.getpid() not in pids
        runs.append((ys, [b["noise"].tolist() for b in batches]))
    assert runs[0] == runs[1]  # the same generator: the same order and augmentation
    # Every shard is in the shared cache once.
    assert sorted(f for f in os.listdir(tmp_path / "cache") if f.endswith(".tfrecord")) == \
        [f"shard-{s}.tfrecord" for s in range(SHARDS)]
    stream.close()


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_a_transform_runs_in_the_workers(remote, tmp_path, ctx):
    ds = StreamingDataset(remote, str(tmp_path / "cache"), max_bytes=1 << 30, mode="full", features=FEATURES,
                          transform=plus_one)
    assert ds[5]["x"][0] == 6  # here too
    batches = list(stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, multiprocessing_context=ctx))
    assert sorted(y for b in batches for y in b["y"].tolist()) == list(range(N))
    assert all((b["x"][:, 0] == b["y"] + 1).all() for b in batches)
    ds.close()


def _stats_in_a_worker(ds):
    return ds.stats()


def test_what_a_worker_cannot_do_is_named(remote, tmp_path):
    # (min_shards=1: the refusal does not depend on how many shards are cached)
    growing = StreamingDataset(remote, str(tmp_path / "g"), max_bytes=1 << 30, mode="cached", features=FEATURES)
    with pytest.raises(Exception, match="mode='cached' is the shards cached.*mode='full'"):
        list(torch.utils.data.DataLoader(Augment(growing), batch_size=8, num_workers=1))
    growing.close()
    nocache = StreamingDataset(remote, str(tmp_path / "n"), max_bytes=0, mode="full", features=FEATURES)
    with pytest.raises(Exception, match="max_bytes > 0"):
        list(torch.utils.data.DataLoader(Augment(nocache), batch_size=8, num_workers=1))
    nocache.close()
    full = StreamingDataset(remote, str(tmp_path / "f"), max_bytes=1 << 30, mode="full", features=FEATURES)
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(1) as pool:
        with pytest.raises(RuntimeError, match="only reads"):
            pool.apply(_stats_in_a_worker, (full,))
    full.close()
