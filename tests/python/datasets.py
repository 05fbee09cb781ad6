"""Datasets shared by the tests (module-level so spawn can pickle them)."""
import collections
import os
import random

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

Point = collections.namedtuple("Point", ["x", "y"])


class RichDataset(Dataset):
    """Samples of every kind default_collate handles."""

    def __init__(self, n=100):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {
            "t": torch.arange(6, dtype=torch.float32).reshape(2, 3) + i,
            "i64": torch.tensor([i, -i]),
            "u8": torch.full((3,), i % 256, dtype=torch.uint8),
            "b": torch.tensor([i % 2 == 0]),
            "np": np.arange(4, dtype=np.int16) * i,
            "npf": np.full((2, 2), i / 3.0),
            "int": i,
            "float": i / 7.0,
            "bool": bool(i % 3),
            "str": f"s{i}",
            "bytes": bytes([i % 256]),
            "tuple": (i, torch.tensor(float(i))),
            "list": [i, i + 1],
            "nt": Point(i, torch.tensor([i])),
            "nested": {"a": {"b": torch.ones(2) * i}},
        }


class IndexDataset(Dataset):
    def __init__(self, n=100):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor(i)


class ShardedIterable(IterableDataset):
    """Splits range(n) between workers with get_worker_info(), the torch way."""

    def __init__(self, n=101):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class UnevenIterable(IterableDataset):
    """Worker k yields 5 * (k + 1) items: workers run out at different times."""

    def __iter__(self):
        info = get_worker_info()
        wid = info.id if info else 0
        return iter([wid * 1000 + j for j in range(5 * (wid + 1))])


class SeedDataset(Dataset):
    """Reports the worker's RNG draws and identity."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"py": random.random(), "torch": torch.rand(1).item(), "np": float(np.random.rand()),
                "wid": info.id, "seed": info.seed, "pid": os.getpid(), "threads": torch.get_num_threads()}


class BigDataset(Dataset):
    def __init__(self, n, floats):
        self.n, self.floats = n, floats

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((self.floats,), float(i))


def record_init(worker_id):
    os.environ["STOKER_TEST_INIT"] = str(worker_id)
    torch.manual_seed(1234 + worker_id)


class InitEnvDataset(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"init": os.environ.get("STOKER_TEST_INIT", "none"), "r": torch.rand(1).item()}


class FailingDataset(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"bad sample {i}")
        return torch.tensor(i)


class Batch:
    """A custom batch class a user collate_fn might return."""

    def __init__(self, x, names):
        self.x, self.names = x, names


def custom_collate(samples):
    return Batch(torch.stack(samples), [f"n{int(s)}" for s in samples])


class NamesDataset(Dataset):
    """Per-sample metadata the way real datasets keep it: one file name per
    sample, in whatever container the test passes (list or StringList)."""

    def __init__(self, names):
        self.names = names

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        name = self.names[i]
        return torch.tensor([i, len(name)])


class ArrayWriter(Dataset):
    """Each sample writes its index into a shared array, then returns it."""

    def __init__(self, arr):
        self.arr = arr

    def __len__(self):
        return len(self.arr)

    def __getitem__(self, i):
        self.arr[i] = i * 10 + 1
        return i
