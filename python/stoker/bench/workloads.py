"""The built-in synthetic dataset and the workloads `stoker bench` runs.

Samples are views of a small pre-built table (like rows of a memory-mapped
dataset), so a run measures the loader, not the cost of making data.  Both
loaders read the same dataset object with the same arguments.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import Dataset


class SyntheticDataset(Dataset):
    """`length` samples; sample i is a float32 tensor of `sample_shape` whose
    values start at i (row i % rows of a table)."""

    def __init__(self, length: int, sample_shape, rows: int = 64):
        self.length = length
        self.sample_shape = tuple(sample_shape)
        numel = 1
        for d in self.sample_shape:
            numel *= d
        self.table = torch.arange(rows, dtype=torch.float32).unsqueeze(1) + torch.zeros(rows, numel)
        self.table = self.table.reshape((rows,) + self.sample_shape)
        self.rows = rows

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return self.table[i % self.rows]

    @property
    def sample_bytes(self) -> int:
        return self.table[0].numel() * 4


@dataclass
class Workload:
    key: str
    title: str
    sample_shape: tuple
    batch_size: int
    num_workers: int
    rows: int

    def dataset(self, length: int = 1 << 40, kind: str = "torch"):
        if self.key == "i":
            return image_dataset(kind, self.rows)
        return SyntheticDataset(length, self.sample_shape, self.rows)


def image_dataset(kind: str, count: int):
    """Workload i: a folder of JPEGs (made once, kept in ~/.cache/stoker),
    read with PIL in __getitem__ by torch's loader, with stoker.vision by
    stoker's (the same train pipeline: RandomResizedCrop 224, flip, float32,
    normalize)."""
    import os
    from stoker.bench import images
    root = os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")), "stoker", "bench-images")
    images.make_images(root, count)
    ds = images.PILImageFolder(root) if kind == "torch" else images.vision_folder(root)
    ds.sample_bytes = 3 * 224 * 224 * 4
    return ds


WORKLOADS = {
    "a": Workload("a", "tiny samples (16 float32), batch 64, 2 workers", (16,), 64, 2, 4096),
    "b": Workload("b", "tiny samples (16 float32), batch 1, 2 workers", (16,), 1, 2, 4096),
    "c": Workload("c", "4 MiB float32 samples, batch 8, 2 workers", (1024, 1024), 8, 2, 16),
    # rows: the number of images.  torch: PIL; stoker: stoker.vision.
    "i": Workload("i", "JPEGs -> train crop 224, batch 64, 2 workers", (3, 224, 224), 64, 2, 1000),
}
