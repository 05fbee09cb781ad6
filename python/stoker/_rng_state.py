"""Worker random state, recorded as workers go, so that a replacement worker
and a resumed run continue each worker's random streams exactly.

A dataset that draws in `__getitem__` (a random crop, a flip) draws from its
worker's global streams: Python's `random`, numpy's legacy global generator
and torch's default CPU generator, each seeded as torch seeds them.  Worker w
loads batches w, w + n, w + 2n, ... in that order (batch k goes to worker
k mod n), so the state of its streams after batch b is all a new process
needs to draw what worker w would have drawn next.

The board is one memfd mapped by the main process and every worker: per
worker a ring of `depth` entries, each a plain record

    u64 seq      write count of this worker's entries (0: empty); written last
    u64 gen      the epoch's generation (Scheduler::generation)
    i64 batch    the batch id after which the state was taken (recorded only
                 when the state changed during the batch); START (the state
                 after start-up: seeding, worker_init_fn) or BEFORE (the
                 state before the generation's first task)
    u32 nbytes   payload length
    u32 pad
    payload      capture(): a pickle of the three streams' states

Process safety: each worker writes only its own ring, one thread at a time;
the main process only reads.  A reader takes an entry only when `seq` is
non-zero and the same before and after it copied the entry (a writer zeroes
`seq`, writes the record, then sets `seq`), so a torn entry is never used.
The ring holds 2 * ceil(prefetch / num_workers) + 6 entries per worker: in
order, a worker is at most that many of its own batches past the last one
delivered, so the entries the main process asks for are never overwritten.
"""
from __future__ import annotations

import array
import ctypes
import mmap
import os
import pickle
import random
import struct
import sys
from typing import Optional

START = -1
BEFORE = -2
_HEAD = struct.Struct("<QQqII")
ENTRY_BYTES = 16 << 10
_PAYLOAD_MAX = ENTRY_BYTES - _HEAD.size


def _python_state_address(inst) -> Optional[int]:
    """Where CPython keeps `inst`'s Mersenne Twister (int index, then 624
    uint32 words, right after the object header), checked against
    getstate(); None where the layout differs (then getstate() is used)."""
    try:
        version, key, _gauss = inst.getstate()
        addr = id(inst) + 2 * ctypes.sizeof(ctypes.c_void_p)
        raw = ctypes.string_at(addr, _PY_RAW)
        words = array.array("I")
        words.frombytes(raw[4:])
        if version == 3 and tuple(words) + (int.from_bytes(raw[:4], "little", signed=True),) == key:
            return addr
    except Exception:  # noqa: BLE001 - any surprise: the slow path
        pass
    return None


def _numpy_state_address(np) -> Optional[int]:
    """numpy's global RandomState: its MT19937 state (624 uint32 key words,
    then int pos) through the bit generator's ctypes interface, checked."""
    try:
        addr = np.random.mtrand._rand._bit_generator.ctypes.state_address
        _name, keys, pos, _hg, _g = np.random.get_state()
        raw = ctypes.string_at(addr, _NP_RAW)
        if raw[:2496] == keys.astype("<u4").tobytes() and int.from_bytes(raw[2496:], "little", signed=True) == pos:
            return addr
    except Exception:  # noqa: BLE001
        pass
    return None


_PY_RAW = 4 + 624 * 4
_NP_RAW = 624 * 4 + 4


class Recorder:
    """Takes a worker's random state after each batch, cheaply: the three
    generators' raw words are compared with the last capture (about 4
    microseconds), and a new capture is packed only when they changed.

    A worker whose batches have not changed its state QUIET_BATCHES times in
    a row (a dataset that draws nothing: the comparison would be most of a
    tiny batch's cost) checks only every SPARSE_EVERY batches from then on,
    and every batch again as soon as a check finds a change.  What this
    gives up: a dataset that starts drawing after a long quiet stretch has
    its first draws recorded up to SPARSE_EVERY - 1 batches late."""

    QUIET_BATCHES = 64
    SPARSE_EVERY = 32

    def __init__(self):
        self._quiet = 0
        self._sparse = False
        self._skipped = 0
        self._np = sys.modules.get("numpy")
        self._torch = sys.modules.get("torch")
        self._py_addr = _python_state_address(random._inst)
        self._np_addr = _numpy_state_address(self._np) if self._np is not None else None
        self._raw = None
        self._np_fields = None  # the last numpy state: (name, keys, itemsize, pos, has_gauss, gauss)
        self.blob = None        # the last capture

    def _raw_now(self):
        inst = random._inst
        py = ctypes.string_at(self._py_addr, _PY_RAW) if self._py_addr is not None else inst.getstate()
        np_raw = ctypes.string_at(self._np_addr, _NP_RAW) if self._np_addr is not None else None
        ts = self._torch.get_rng_state().numpy().tobytes() if self._torch is not None else None
        return py, inst.gauss_next, np_raw, ts

    def changed(self) -> bool:
        """Captures the state now; True if it differs from the last capture."""
        raw = self._raw_now()
        py, gauss, np_raw, ts = raw
        np_fields = self._np_fields
        # numpy is read in full (get_state) when its words cannot be read
        # directly, when they changed, or when the last state held a cached
        # gaussian (it can be used up without a draw).
        if self._np is not None and (np_fields is None or np_raw is None or np_raw != self._raw[2] or np_fields[4]):
            name, keys, pos, has_gauss, cached = self._np.random.get_state()
            np_fields = (name, keys.tobytes(), int(keys.dtype.itemsize), int(pos), int(has_gauss), float(cached))
        if raw == self._raw and np_fields == self._np_fields:
            return False
        self._raw, self._np_fields = raw, np_fields
        pys = ("raw", py, gauss) if self._py_addr is not None else ("state", py)
        self.blob = pickle.dumps((pys, np_fields, ts), protocol=5)
        return True

    def current(self) -> bytes:
        self.changed()
        return self.blob

    def after_batch(self) -> bool:
        """Called after each batch: True when `blob` is a new state to record."""
        if self._sparse:
            self._skipped += 1
            if self._skipped < self.SPARSE_EVERY:
                return False
            self._skipped = 0
        if self.changed():
            self._quiet, self._sparse = 0, False
            return True
        self._quiet += 1
        self._sparse = self._quiet >= self.QUIET_BATCHES
        return False


def capture() -> bytes:
    """The state of this process's global random streams (about 10 KB)."""
    return Recorder().current()


def restore(blob: bytes):
    """Sets this process's global random streams to a capture()."""
    pys, nps, ts = pickle.loads(blob)
    if pys[0] == "raw":
        _kind, raw, gauss = pys
        words = array.array("I")
        words.frombytes(raw[4:])
        random.setstate((3, tuple(words) + (int.from_bytes(raw[:4], "little", signed=True),), gauss))
    else:
        random.setstate(pys[1])
    if nps is not None:
        import numpy as np
        name, keys, itemsize, pos, has_gauss, cached = nps
        np.random.set_state((name, np.frombuffer(keys, dtype=f"u{itemsize}").copy(), pos, has_gauss, cached))
    if ts is not None:
        import torch
        torch.set_rng_state(torch.frombuffer(bytearray(ts), dtype=torch.uint8))


class RngBoard:
    """The shared record of every worker's random state (see module doc)."""

    def __init__(self, num_workers: int, depth: int, fd: Optional[int] = None):
        self.num_workers, self.depth = num_workers, depth
        size = num_workers * depth * ENTRY_BYTES
        if fd is None:
            fd = os.memfd_create("stoker-rng", os.MFD_CLOEXEC)
            os.ftruncate(fd, size)
        self.fd = fd
        self._map = mmap.mmap(fd, size)
        self._seq = 0  # writer side: this process's write count

    @staticmethod
    def for_prefetch(num_workers: int, prefetch: int) -> "RngBoard":
        """A board for `prefetch` batches in flight among `num_workers`: in
        order, a worker is at most ceil(prefetch / num_workers) of its own
        batches past the last one delivered (16 KiB an entry: 160 KiB a
        worker with torch's default prefetch_factor)."""
        return RngBoard(num_workers, 2 * -(-prefetch // num_workers) + 6)

    def __reduce__(self):
        from multiprocessing import reduction
        return (RngBoard._rebuild, (self.num_workers, self.depth, reduction.DupFd(self.fd)))

    @staticmethod
    def _rebuild(num_workers, depth, dupfd):
        return RngBoard(num_workers, depth, dupfd.detach())

    def close(self):
        try:
            self._map.close()
            os.close(self.fd)
        except (OSError, ValueError, BufferError):
            pass

    # ---- worker side ----------------------------------------------------------

    def start_writer(self, worker: int):
        """A (replacement) worker starts writing after the entries already there."""
        self._seq = max((self._read(worker, i)[0] for i in range(self.depth)), default=0)

    def record(self, worker: int, gen: int, batch: int, blob: bytes):
        if len(blob) > _PAYLOAD_MAX:
            return  # cannot happen with the three standard streams
        self._seq += 1
        off = (worker * self.depth + self._seq % self.depth) * ENTRY_BYTES
        m = self._map
        m[off:off + 8] = b"\0" * 8
        m[off + 8:off + _HEAD.size] = _HEAD.pack(0, gen, batch, len(blob), 0)[8:]
        m[off + _HEAD.size:off + _HEAD.size + len(blob)] = blob
        m[off:off + 8] = struct.pack("<Q", self._seq)

    # ---- main side ------------------------------------------------------------

    def _read(self, worker: int, i: int):
        off = (worker * self.depth + i) * ENTRY_BYTES
        seq, gen, batch, n, _ = _HEAD.unpack_from(self._map, off)
        if seq == 0 or n > _PAYLOAD_MAX:
            return 0, 0, 0, None
        blob = bytes(self._map[off + _HEAD.size:off + _HEAD.size + n])
        if struct.unpack_from("<Q", self._map, off)[0] != seq:
            return 0, 0, 0, None  # overwritten while read
        return seq, gen, batch, blob

    def _entries(self, worker: int) -> list:
        """Worker `worker`'s readable entries: (seq, gen, batch, blob)."""
        return [e for e in (self._read(worker, i) for i in range(self.depth)) if e[0]]

    def newest(self, worker: int) -> Optional[bytes]:
        """The latest state worker `worker` recorded."""
        entries = self._entries(worker)
        return max(entries, key=lambda e: e[0])[3] if entries else None

    def lookup(self, worker: int, gen: int, after_batch: Optional[int]) -> Optional[bytes]:
        """The state worker `worker` had after batch `after_batch` of
        generation `gen` (None: before its first task of that generation).
        A worker records a batch only when its state changed, so that is
        the entry of the latest batch at or before `after_batch`, else the
        one before the generation's first task, else its newest (it has not
        started the generation yet)."""
        entries = self._entries(worker)
        ours = [e for e in entries if e[1] == gen]
        if after_batch is not None:
            done = [e for e in ours if 0 <= e[2] <= after_batch]
            if done:
                return max(done, key=lambda e: (e[2], e[0]))[3]
        before = [e for e in ours if e[2] == BEFORE]
        if before:
            return max(before, key=lambda e: e[0])[3]
        if any(e[2] >= 0 for e in ours):
            return None  # it began the generation, and the entry asked for is gone
        return max(entries, key=lambda e: e[0])[3] if entries else None
