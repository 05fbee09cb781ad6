import collections
import contextlib
import os
import time

import numpy as np
import torch


def assert_same(a, b, path="batch"):
    """Structure, types, dtypes and values equal (tensors compared exactly)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{path}: {type(b)} is not a tensor"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert torch.equal(a, b), f"{path}: values differ"
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        assert np.array_equal(a, b), path
        return
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def batches(loader):
    return list(loader)


def memory_cgroup():
    """This process's cgroup v1 memory directory, if writable (else None)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _hid, ctrl, path = line.strip().split(":", 2)
                if "memory" in ctrl.split(","):
                    d = f"/sys/fs/cgroup/memory{path}"
                    return d if os.access(d, os.W_OK) else None
    except OSError:
        pass
    return None


@contextlib.contextmanager
def limited_cgroup(limit_bytes: int, tag: str):
    """A child memory cgroup (v1) limited to limit_bytes; skips the test where
    there is no writable memory controller.  Removed afterwards."""
    import pytest
    parent = memory_cgroup()
    if parent is None:
        pytest.skip("no writable cgroup v1 memory controller here")
    cg = os.path.join(parent, f"stoker_{tag}_{os.getpid()}")
    os.mkdir(cg)
    try:
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit_bytes))
        yield cg
    finally:
        time.sleep(0.2)  # the last member's exit must be accounted first
        os.rmdir(cg)


def counting_shards(www, shards: int, per_shard: int, width: int = 0) -> str:
    """Writes `shards` TFRecord shards under `www` (made here), each of
    `per_shard` records {"y": int64}, y counting 0, 1, 2, ... across them
    (with `width`, also "x": float32[width], every value y), and the index a
    StreamingDataset reads; returns the folder."""
    from stoker.cache import write_index
    from stoker.io import write_tfrecord
    os.makedirs(www)
    for s in range(shards):
        ys = range(s * per_shard, (s + 1) * per_shard)
        write_tfrecord(os.path.join(www, f"shard-{s:03d}.tfrecord"),
                       [dict(y=np.int64(y), **({"x": np.full(width, y, np.float32)} if width else {})) for y in ys])
    write_index(str(www))
    return str(www)
