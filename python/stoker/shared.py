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
from typing import Any, Sequence

import numpy as np

from stoker import _native as N

SharedBlock = N.lib.SharedBlock

__all__ = ["StringList", "Array", "Lock", "Counter", "BagSampler", "BagExhausted"]

BagExhausted = N.lib.BagExhausted
BagExhausted.__module__ = __name__


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


# ---- Lock --------------------------------------------------------------------

class Lock:
    """Lock(): a lock shared by every process that has it (workers, the main
    process), reentrant like threading.RLock, and robust: if its holder dies
    (even by SIGKILL) the next acquirer gets it, with no deadlock, and
    ``previous_owner_died`` tells it to check what the lock guards.  A wait
    for it ends with KeyboardInterrupt on Ctrl-C, as threading.Lock's does.

        with lock:
            if lock.previous_owner_died:
                repair()          # the dead holder may have been mid-update
            update()
    """

    def __init__(self):
        self._attach(N.lib.SharedLock.create())

    def _attach(self, native):
        self._lock = native
        self._depth = 0       # acquisitions by the holding thread (only it writes)
        self._died = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            timeout = 0
        elif timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        ok, died = self._lock.acquire(float(timeout))
        if ok:
            self._depth += 1
            if died:
                self._died = True
        return ok

    def release(self):
        try:
            self._lock.release()
        except ValueError:
            raise RuntimeError("cannot release un-acquired lock") from None
        self._depth -= 1
        if self._depth == 0:
            self._died = False

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()

    @property
    def previous_owner_died(self) -> bool:
        """True while held after an acquisition that found its holder dead."""
        return self._died

    @property
    def owner_deaths(self) -> int:
        """How many holders died holding this lock, ever."""
        return self._lock.owner_deaths

    def __repr__(self):
        return f"<stoker.shared.Lock owner_deaths={self.owner_deaths}>"

    def __reduce__(self):
        return _rebuild, (Lock, N.lib.SharedLock, _BlockRef(self._lock.block))


# ---- Counter -----------------------------------------------------------------

class Counter:
    """Counter(initial=0): a 64-bit integer every process updates atomically
    (lock-free, so a process that dies leaves nothing locked)."""

    def __init__(self, initial: int = 0):
        self._attach(N.lib.SharedCounter.create(int(initial)))

    def _attach(self, native):
        self._c = native
        self.add = native.add            # add(n) -> the new value
        self.exchange = native.exchange  # exchange(v) -> the old value

    @property
    def value(self) -> int:
        return self._c.load()

    @value.setter
    def value(self, v: int):
        self._c.store(int(v))

    def increment(self) -> int:
        return self._c.add(1)

    def compare_exchange(self, expected: int, desired: int):
        """Sets `desired` if the value is `expected`; returns (done, value before)."""
        return self._c.compare_exchange(int(expected), int(desired))

    def __iadd__(self, n: int):
        self._c.add(int(n))
        return self

    def __isub__(self, n: int):
        self._c.add(-int(n))
        return self

    def __int__(self):
        return self.value

    __index__ = __int__

    def __repr__(self):
        return f"stoker.shared.Counter({self.value})"

    def __reduce__(self):
        return _rebuild, (Counter, N.lib.SharedCounter, _BlockRef(self._c.block))


# ---- BagSampler --------------------------------------------------------------

# on_exhausted's choices: the C++ enum's members (OnExhausted, bag_sampler.h), named in lower case.
_ON_EXHAUSTED = {m.name.lower(): m for m in N.lib.OnExhausted}


class BagSampler:
    """BagSampler(bag_sizes, k, weights=None, on_exhausted="reset", seed=None)

    For multiple-instance learning: ``draw(bag)`` returns k instance indices
    (0-based within the bag, an int64 numpy array) drawn without replacement
    across every process that shares the sampler, atomically.  Each pick
    follows the instances' weights among those not drawn yet in the bag's
    current cycle (as torch.multinomial without replacement); a weight of 0
    never draws.  When fewer than k are left, ``on_exhausted`` decides:
    "reset" starts a new cycle and draws from it (what MIL training code does),
    "fewer" returns what is left (a new cycle starts once none is), "raise"
    raises BagExhausted (call ``reset(bag)``).

    ``weights``: None (all 1), a sequence of per-bag arrays, or one flat array
    over all instances.  ``set_weights(bag, w)`` changes them at any time, from
    any process (e.g. from the loss in the training loop); the next draw of
    that bag anywhere sees them.

    A process killed inside ``draw`` leaves the bag consistent: the next draw
    rolls the half-done one back (counted in ``recoveries``).
    """

    def __init__(self, bag_sizes: Sequence[int], k: int, weights: Any = None, on_exhausted: str = "reset",
                 seed: int | None = None):
        if on_exhausted not in _ON_EXHAUSTED:
            raise ValueError(f"on_exhausted should be one of {sorted(_ON_EXHAUSTED)}, but got {on_exhausted!r}")
        sizes = [int(n) for n in bag_sizes]
        if any(n <= 0 for n in sizes):
            bad = next(i for i, n in enumerate(sizes) if n <= 0)
            raise ValueError(f"BagSampler: bag {bad} has {sizes[bad]} instances; every bag needs at least one")
        flat = [] if weights is None else _flat_weights(weights, sizes)
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self._attach(N.lib.NativeBagSampler.create(sizes, int(k), flat, _ON_EXHAUSTED[on_exhausted],
                                                   int(seed) & (2 ** 64 - 1)))

    def _attach(self, native):
        self._s = native
        self.draw = native.draw      # draw(bag, with_cycle=False): fast path, no Python frame
        self.reset = native.reset
        self.remaining = native.remaining

    def set_weights(self, bag: int, weights: Any):
        """Replaces the weights of bag `bag` (one per instance)."""
        self._s.set_weights(int(bag), np.ascontiguousarray(_as_numpy(weights), dtype=np.float64).ravel())

    def bag_size(self, bag: int) -> int:
        return self._s.bag_size(int(bag))

    def __len__(self) -> int:
        return self._s.num_bags

    @property
    def k(self) -> int:
        return self._s.k

    @property
    def draws(self) -> int:
        """Draws by every process together."""
        return self._s.draws

    @property
    def recoveries(self) -> int:
        """Half-done draws of processes that died, rolled back."""
        return self._s.recoveries

    def __repr__(self):
        return f"stoker.shared.BagSampler(bags={len(self)}, k={self.k}, draws={self.draws})"

    def __reduce__(self):
        return _rebuild, (BagSampler, N.lib.NativeBagSampler, _BlockRef(self._s.block))


def _as_numpy(w):
    if type(w).__module__.startswith("torch"):
        return w.detach().cpu().numpy()
    return np.asarray(w)


def _flat_weights(weights, sizes):
    if isinstance(weights, (list, tuple)) and len(weights) == len(sizes) and len(sizes) > 0 and \
            np.ndim(_as_numpy(weights[0])) == 1:
        parts = [np.asarray(_as_numpy(w), dtype=np.float64).ravel() for w in weights]
        for i, (p, n) in enumerate(zip(parts, sizes)):
            if len(p) != n:
                raise ValueError(f"BagSampler: bag {i} has {n} instances but {len(p)} weights")
        return np.concatenate(parts).tolist()
    flat = np.asarray(_as_numpy(weights), dtype=np.float64).ravel()
    if len(flat) != sum(sizes):
        raise ValueError(f"BagSampler: {len(flat)} weights for {sum(sizes)} instances "
                         "(give one array per bag, or one flat array over all instances)")
    return flat.tolist()


def _rebuild(cls, native_cls, block):
    obj = cls.__new__(cls)
    obj._attach(native_cls._open(block))
    return obj
