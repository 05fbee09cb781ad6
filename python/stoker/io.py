"""Native datasets: samples read by C++ threads straight into the slot pool.

    loader = stoker.DataLoader(stoker.io.RawDataset("data.bin", "float32", (1024, 1024)),
                               batch_size=8, shuffle=True, num_workers=2)

With stoker.DataLoader and the default collate, `num_workers` counts C++
threads, not processes: each reads its batch's records with pread into the
slot, with no Python and no GIL on the way.  Any other use (torch's
DataLoader, a collate_fn of yours) goes through __getitem__, which returns
numpy arrays, in worker processes as usual.

So far: RawDataset (fixed-size records in a flat binary file) and NpyDataset
(one .npy file, records along axis 0, or a directory of .npy files).
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from stoker import _native as N

try:
    from torch.utils.data import Dataset as _Base
except ImportError:  # pragma: no cover - numpy-only use
    _Base = object

__all__ = ["NativeDataset", "RawDataset", "NpyDataset"]


class NativeDataset(_Base):
    """Base of the datasets stoker reads natively."""

    _native = None

    def __len__(self) -> int:
        return len(self._native)

    def __getitem__(self, index: int):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {self._native.describe()} ({len(self)} records)")
        parts = self._native.read(int(index))
        arrays = [np.frombuffer(b, dtype=dtype).reshape(shape).copy()
                  for b, (_name, dtype, shape) in zip(parts, self._native.fields)]
        fields = self._native.fields
        if len(fields) == 1 and not fields[0][0]:
            return arrays[0]
        return {name: a for (name, _d, _s), a in zip(fields, arrays)}

    def __repr__(self):
        return f"stoker.io.{type(self).__name__}({self._native.describe()}, {len(self)} records)"

    # Pickled (for spawn workers, when the Python path is used) by its arguments.
    def __reduce__(self):
        return type(self), self._args


class RawDataset(NativeDataset):
    """RawDataset(path, dtype, shape): fixed-size records of `shape` elements
    of `dtype` ("float32", "uint8", ...) from byte 0 to the end of the file."""

    def __init__(self, path: str | os.PathLike, dtype: str, shape: Sequence[int]):
        dtype = np.dtype(dtype).name
        self._args = (os.fspath(path), dtype, tuple(int(d) for d in shape))
        self._native = N.lib.NativeDataset.open_raw(self._args[0], dtype, list(self._args[2]))


class NpyDataset(NativeDataset):
    """NpyDataset(path): one .npy file (C order, little-endian), indexed along
    axis 0, read with pread (nothing loaded up front); or a directory of .npy
    files, one sample each, in name order (all of one dtype and shape)."""

    def __init__(self, path: str | os.PathLike):
        self._args = (os.fspath(path),)
        if os.path.isdir(self._args[0]):
            self._native = N.lib.NativeDataset.open_npy_dir(self._args[0])
        else:
            self._native = N.lib.NativeDataset.open_npy(self._args[0])
