"""Objects whose contents live in shared memory, for datasets and workers.

A dataset that keeps its per-sample metadata in Python objects (a list of
file names, a dict of labels) pays for it in every forked worker: reading a
Python object writes its reference count, so the pages holding it are copied
into each worker as the epoch goes on ("copy-on-read"), and the process tree's
memory grows until it is several times the dataset's.  The containers here
keep their contents as plain bytes in one anonymous shared-memory block
(a memfd: nothing in /dev/shm, nothing left behind) that every process maps:

    names = stoker.shared.StringList(path.name for path in root.iterdir())
    labels = stoker.shared.Array((len(names),), "int64")

They work in place of a list / numpy array inside any Dataset, under fork,
spawn and forkserver workers, with stoker's DataLoader or torch's.  Nothing is
pickled but a handle: a spawned worker maps the same memory.
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterable, Sequence

import numpy as np

from stoker import _native as N

SharedBlock = N.lib.SharedBlock

__all__ = ["StringList", "Array"]


# ---- handles: how a block reaches another process ---------------------------

class _BlockRef:
    """Pickles as a reference to a shared block, never its contents.

    While multiprocessing starts a process (spawn, forkserver) the fd itself
    travels with it; otherwise the receiver opens /proc/<pid>/fd/<fd> of this
    process, which must still be alive (same machine, same user)."""

    def __init__(self, block):
        self.block = block

    def __reduce__(self):
        from multiprocessing import context, reduction
        if context.get_spawning_popen() is not None:
            return _open_fd, (reduction.DupFd(self.block.fd),)
        return _open_proc, (os.getpid(), self.block.fd, os.fstat(self.block.fd).st_ino)


def _open_fd(dupfd):
    fd = dupfd.detach()
    try:
        return SharedBlock.open_fd(fd)
    finally:
        os.close(fd)


def _open_proc(pid: int, fd: int, inode: int):
    path = f"/proc/{pid}/fd/{fd}"
    try:
        block = SharedBlock.open_path(path)
    except OSError as e:
        raise RuntimeError(
            f"stoker.shared: cannot open the shared block of process {pid} ({path}): {e}. A pickled shared "
            "object can be loaded only while the process that pickled it is alive, on the same machine, "
            "by the same user.") from None
    if os.fstat(block.fd).st_ino != inode:
        raise RuntimeError(f"stoker.shared: {path} is no longer the shared block that was pickled "
                           f"(process {pid} closed it)")
    return block


# ---- StringList --------------------------------------------------------------

StringList = N.lib.StringList
StringList.__module__ = __name__
StringList.__doc__ = """StringList(iterable_of_str): an immutable list of str in shared memory.

``len(names)``, ``names[i]`` (negative too) and ``names[a:b]`` behave as on a
list and return new ``str`` objects; reading touches no reference count of
shared data, so forked workers never copy it.  The block is sealed read-only
for every process.  Build it from a generator to avoid holding a list too."""


def _reduce_string_list(sl):
    return _rebuild_string_list, (_BlockRef(sl.block),)


def _rebuild_string_list(block):
    return StringList._open(block)


def _string_list_iter(self):
    for i in range(len(self)):
        yield self[i]


def _string_list_repr(self):
    n = len(self)
    head = ", ".join(repr(self[i]) for i in range(min(n, 3)))
    return f"stoker.shared.StringList([{head}{', ...' if n > 3 else ''}], len={n}, nbytes={self.nbytes})"


StringList.__iter__ = _string_list_iter
StringList.__repr__ = _string_list_repr


# ---- Array -------------------------------------------------------------------

def _np_dtype(dtype) -> np.dtype:
    if dtype is not None and type(dtype).__module__ == "torch":  # torch.float32 etc.
        import torch
        return torch.empty((), dtype=dtype).numpy().dtype
    return np.dtype(dtype)


class Array:
    """Array(shape, dtype="float32"): a zero-filled array in shared memory.

    Every process that has it (forked, spawned, or unpickled while its creator
    is alive) sees and writes the same memory.  Use ``a.numpy()`` or
    ``a.torch()`` for views (no copy), or index it directly like a numpy
    array.  Writes are plain memory writes: guard read-modify-write updates
    shared between workers with a lock.
    """

    __slots__ = ("_block", "_shape", "_dtype", "_view", "__weakref__")

    def __init__(self, shape: int | Sequence[int], dtype: Any = "float32"):
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"stoker.shared.Array: negative dimension in shape {shape}")
        dt = _np_dtype(dtype)
        if dt.hasobject:
            raise TypeError(f"stoker.shared.Array holds plain numbers, not {dt} (use StringList for str)")
        nbytes = math.prod(shape) * dt.itemsize
        self._attach(SharedBlock.create(max(nbytes, 1), "stoker-array"), shape, dt)

    @classmethod
    def from_data(cls, data: Any, dtype: Any = None) -> "Array":
        """A shared copy of an array-like (numpy array, tensor, list)."""
        if type(data).__module__.startswith("torch"):
            data = data.detach().cpu().numpy()
        src = np.asarray(data, dtype=None if dtype is None else _np_dtype(dtype))
        out = cls(src.shape, src.dtype)
        out._view[...] = src
        return out

    def _attach(self, block, shape, dt):
        self._block = block
        self._shape = shape
        self._dtype = dt
        count = math.prod(shape)
        self._view = np.frombuffer(block, dtype=dt, count=count).reshape(shape)

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def nbytes(self) -> int:
        return self._view.nbytes

    def numpy(self) -> np.ndarray:
        """A numpy view of the shared memory (no copy)."""
        return self._view

    def torch(self):
        """A torch tensor viewing the shared memory (no copy)."""
        import torch
        return torch.from_numpy(self._view)

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self._view, dtype=dtype, copy=True)
        return self._view if dtype is None else self._view.astype(dtype, copy=False)

    def __len__(self) -> int:
        return len(self._view)

    def __getitem__(self, key):
        return self._view[key]

    def __setitem__(self, key, value):
        self._view[key] = value

    def __iter__(self):
        return iter(self._view)

    def __repr__(self) -> str:
        return f"stoker.shared.Array(shape={self._shape}, dtype={self._dtype})"

    def __reduce__(self):
        return _rebuild_array, (_BlockRef(self._block), self._shape, self._dtype.str)


def _rebuild_array(block, shape, dtype_str):
    a = Array.__new__(Array)
    a._attach(block, tuple(shape), np.dtype(dtype_str))
    return a
