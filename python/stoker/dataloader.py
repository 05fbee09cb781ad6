"""stoker.DataLoader: a drop-in replacement for torch.utils.data.DataLoader.

The constructor *is* torch's (stoker subclasses it), so arguments, defaults,
validation, error messages, samplers, len() and the generator's use are
torch's own.  What changes is the iterator: workers collate straight into a
shared-memory slot pool and the training loop receives tensors that are views
of those slots, with no pickling and no copy.
"""
from __future__ import annotations

import collections
import itertools
import multiprocessing as python_multiprocessing
import os
import pickle
import threading
import warnings
import weakref
from typing import Any, Optional

import torch
import torch.utils.data
from torch.utils.data import IterableDataset
from torch.utils.data.dataloader import _BaseDataLoaderIter, _DatasetKind

from stoker import _native as N
from stoker._worker import ArenaHandle, WorkerConfig, worker_main, publish_batch
from stoker.errors import ErrorReport, LoaderTimeout, WorkerCrashed, describe_exit, short_repr

#: Default byte budget of the slot pool (documented in README.md).
DEFAULT_MAX_MEMORY = 1 << 30

_JOIN_TIMEOUT_S = 5.0


class DataLoader(torch.utils.data.DataLoader):
    """torch.utils.data.DataLoader, fed through stoker's shared-memory engine.

    Every argument of torch's DataLoader is accepted with torch's meaning and
    default.  Extra keyword-only arguments:

    max_memory: bytes of shared memory the loader may use for batches in
        flight (default 1 GiB).  A batch larger than what is free still loads
        (the pool grows up to a hard cap of max(2 x max_memory,
        max_memory + 256 MiB)) with a one-time warning.
    output: "torch" (default) for torch tensors, "numpy" for numpy arrays.
    """

    def __init__(self, dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 max_memory: int = DEFAULT_MAX_MEMORY, output: str = "torch"):
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                         batch_sampler=batch_sampler, num_workers=num_workers, collate_fn=collate_fn,
                         pin_memory=pin_memory, drop_last=drop_last, timeout=timeout,
                         worker_init_fn=worker_init_fn, multiprocessing_context=multiprocessing_context,
                         generator=generator, prefetch_factor=prefetch_factor,
                         persistent_workers=persistent_workers, pin_memory_device=pin_memory_device,
                         in_order=in_order)
        if not isinstance(max_memory, int) or isinstance(max_memory, bool) or max_memory < (1 << 20):
            raise ValueError(f"max_memory should be an int of at least 1 MiB (1048576 bytes), but got {max_memory!r}")
        if output not in ("torch", "numpy"):
            raise ValueError(f"output should be 'torch' or 'numpy', but got {output!r}")
        self.max_memory = max_memory
        self.output = output
        # torch's __init__ replaces a missing collate_fn with its default;
        # remember whether the user gave one so the native collate can run.
        self._user_collate_fn = collate_fn

    def _get_iterator(self):
        if self.num_workers > 0:
            self.check_worker_number_rationality()
        return _StokerIter(self)

    def stats(self) -> dict:
        """Memory, slot and worker statistics of the live iterator (empty if none)."""
        it = self._iterator if self._iterator is not None else getattr(self, "_last_iter", lambda: None)()
        return it.stats() if it is not None else {}


def _is_default(fn, name: str) -> bool:
    return fn is None or fn is getattr(torch.utils.data, name, None) or \
        fn is getattr(torch.utils.data._utils.collate, name, None)


class _StokerIter(_BaseDataLoaderIter):
    """One pass (or, with persistent workers, many passes) over a DataLoader."""

    def __init__(self, loader: DataLoader):
        super().__init__(loader)
        loader._last_iter = weakref.ref(self)
        self._numpy = loader.output == "numpy"
        self._in_order = loader.in_order
        self._is_iterable = self._dataset_kind == _DatasetKind.Iterable
        nw = self._num_workers
        self._prefetch = (loader.prefetch_factor or 2) * max(nw, 1)
        user_collate = loader._user_collate_fn
        if self._auto_collation:
            self._wcollate = None if _is_default(user_collate, "default_collate") else loader.collate_fn
            self._convert = False
        else:
            self._wcollate = None if _is_default(user_collate, "default_convert") else loader.collate_fn
            self._convert = self._wcollate is None
        self._engine = N.Engine(nw, loader.max_memory, 0, max(256, 4 * self._prefetch + 64))
        self._warned = set()
        self._pinned_upto = 0
        self._workers = []
        self._shutdown = False
        self._gen = 0
        self._stats = _Throughput()
        if nw > 0:
            self._start_workers(loader)
        self._reset(loader, first_iter=True)

    # ---- lifecycle -------------------------------------------------------

    def _start_workers(self, loader):
        ctx = loader.multiprocessing_context or python_multiprocessing.get_context()
        forked = ctx.get_start_method() == "fork"
        handle = ArenaHandle(engine=self._engine) if forked else ArenaHandle(fd=self._engine.fd)
        for wid in range(self._num_workers):
            cfg = WorkerConfig(
                arena=handle, worker_id=wid, num_workers=self._num_workers, dataset=self._dataset,
                is_iterable=self._is_iterable, auto_collation=self._auto_collation,
                collate_fn=self._wcollate, convert=self._convert, drop_last=self._drop_last,
                base_seed=self._base_seed, worker_init_fn=loader.worker_init_fn,
                numpy_mode=self._numpy, parent_pid=os.getpid())
            w = ctx.Process(target=worker_main, args=(cfg,), daemon=True, name=f"stoker-worker-{wid}")
            w.start()
            self._engine.watch(wid, w.pid)
            self._workers.append(w)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._gen += 1
        self._send_idx = 0
        self._rcvd_idx = 0
        self._pending_index = None
        self._exhausted = False
        # Batches of an abandoned epoch: release what is ready, drop the rest on arrival.
        for entry in getattr(self, "_ready", {}).values():
            if entry[0] == "batch":
                self._engine.release(entry[1])
        self._ready = {} if self._in_order else collections.OrderedDict()
        self._tasks = {}           # batch id -> (worker, slot, index) in flight this generation
        self._outstanding = [0] * max(self._num_workers, 1)
        self._active = [True] * self._num_workers
        self._cycle = itertools.cycle(range(self._num_workers)) if self._num_workers else None
        if not first_iter and self._is_iterable:
            for wid in range(self._num_workers):
                self._engine.send_resume(wid, self._gen)
        self._stats.reset()

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        engine = getattr(self, "_engine", None)
        if engine is None:
            return
        for wid in range(len(self._workers)):
            engine.forget(wid)
        engine.shutdown()
        deadline = _JOIN_TIMEOUT_S
        for w in self._workers:
            w.join(timeout=deadline)
            if w.is_alive():
                w.kill()
                w.join()
            deadline = 0.1
        for entry in getattr(self, "_ready", {}).values():
            if entry[0] == "batch":
                engine.release(entry[1])
        self._ready = {}

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass

    # ---- dispatch --------------------------------------------------------

    def _pick_worker(self) -> Optional[int]:
        if self._is_iterable:
            for _ in range(self._num_workers):
                wid = next(self._cycle)
                if self._active[wid]:
                    return wid
            return None
        return min(range(self._num_workers), key=self._outstanding.__getitem__)

    def _dispatch_one(self, wid: int, index, over_budget: bool) -> int:
        bid, gen, eng = self._send_idx, self._gen, self._engine
        if self._is_iterable:
            if self._auto_collation:
                return eng.dispatch_payload(wid, bid, gen, N.TASK_ITER_BATCH, len(index).to_bytes(8, "little"), over_budget)
            return eng.dispatch_payload(wid, bid, gen, N.TASK_ITER_ITEM, None, over_budget)
        if self._auto_collation:
            slot = eng.dispatch_indices(wid, bid, gen, index, over_budget)
            if slot != -2:
                return slot
        elif type(index) is int and -(1 << 63) <= index < (1 << 63):
            return eng.dispatch_payload(wid, bid, gen, N.TASK_INDEX, index.to_bytes(8, "little", signed=True), over_budget)
        return eng.dispatch_payload(wid, bid, gen, N.TASK_PICKLED, pickle.dumps(index), over_budget)

    def _try_dispatch(self):
        while len(self._tasks) < self._prefetch and not self._exhausted:
            wid = self._pick_worker()
            if wid is None:
                return
            if self._pending_index is None:
                try:
                    self._pending_index = self._next_index()
                except StopIteration:
                    self._exhausted = True
                    return
            slot = self._dispatch_one(wid, self._pending_index, over_budget=not self._tasks and not self._ready)
            if slot < 0:
                return
            self._tasks[self._send_idx] = (wid, slot, self._pending_index)
            self._outstanding[wid] += 1
            self._send_idx += 1
            self._pending_index = None

    # ---- completion ------------------------------------------------------

    def _collect(self, timeout: float):
        for kind, slot, wid, bid, gen, result, pid, code, sig in self._engine.wait(timeout):
            if kind == N.COMPLETION_EXIT:
                self._on_worker_exit(wid, pid, code, sig)
                continue
            if gen != self._gen or bid not in self._tasks:
                self._engine.release(slot)  # from an abandoned epoch
                continue
            self._outstanding[wid] -= 1
            if result == N.RESULT_OK:
                entry = ("batch", slot, wid)
            elif result == N.RESULT_STOP:
                self._engine.release(slot)
                self._active[wid] = False
                entry = ("stop", None, wid)
            else:
                data = self._engine.slot_bytes(slot)
                self._engine.release(slot)
                entry = ("error", data, wid)
            self._ready[bid] = entry

    def _on_worker_exit(self, wid, pid, code, sig):
        if self._shutdown:
            return
        held = [(bid, idx) for bid, (w, _s, idx) in self._tasks.items() if w == wid]
        what = describe_exit(sig, code)
        msg = f"DataLoader worker {wid} (pid {pid}) exited unexpectedly: {what}"
        if held:
            msg += "; it held " + ", ".join(f"batch {b} (indices {short_repr(i, 120)})" for b, i in held)
        if sig == 9:
            msg += (". A SIGKILL is often the kernel's OOM killer: check `dmesg -T`, "
                    "lower batch_size/num_workers or give the job more memory")
        self._shutdown_workers()
        raise WorkerCrashed(msg, worker_id=wid, pid=pid, signal=sig or None,
                            exit_code=None if sig else code, indices=[i for _b, i in held])

    # ---- iteration -------------------------------------------------------

    def _take_ready(self):
        if self._in_order:
            return self._rcvd_idx, self._ready.pop(self._rcvd_idx, None)
        if self._ready:
            return self._ready.popitem(last=False)
        return None, None

    def _epoch_done(self) -> bool:
        if self._is_iterable:
            return not any(self._active) and not self._tasks
        return self._exhausted and not self._tasks

    def _next_data(self):
        if self._num_workers == 0:
            return self._next_local()
        if self._shutdown:
            raise StopIteration
        while True:
            self._try_dispatch()
            bid, entry = self._take_ready()
            if entry is not None:
                self._tasks.pop(bid, None)
                if self._in_order:
                    self._rcvd_idx += 1
                kind, payload, _wid = entry
                if kind == "stop":
                    continue
                if kind == "error":
                    self._try_dispatch()
                    pickle.loads(payload).reraise()
                return self._hand_out(payload)
            if self._epoch_done():
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            self._wait_for_completion()

    def _wait_for_completion(self):
        if self._timeout > 0:
            t0 = self._stats.now()
            self._collect(self._timeout)
            if not self._ready and self._stats.now() - t0 >= self._timeout:
                self._raise_timeout()
        else:
            self._collect(-1.0)

    def _raise_timeout(self):
        held = collections.defaultdict(list)
        for bid, (wid, _slot, idx) in self._tasks.items():
            held[wid].append(f"batch {bid} (indices {short_repr(idx, 120)})")
        parts = [f"worker {wid} (pid {self._workers[wid].pid}) holds {', '.join(b)}" for wid, b in sorted(held.items())]
        raise LoaderTimeout(f"DataLoader timed out after {self._timeout} seconds"
                            + ("; " + "; ".join(parts) if parts else ""))

    def _hand_out(self, slot: int):
        data, copied = self._engine.decode(slot, self._numpy)
        if copied:
            self._warn_once("copy", "stoker: the training loop holds so many batches that the slot pool "
                            f"(max_memory={self._engine.stats()['max_memory']} bytes) would run out; further batches "
                            "are copied out of shared memory. Drop references to old batches or raise max_memory.")
        self._after_batch()
        return data

    def _after_batch(self):
        if self._pin_memory:
            self._pin_new_memory()
        if "over" not in self._warned:
            st = self._engine.stats()
            if st["over_budget_events"]:
                self._warn_once("over", f"stoker: a batch of {st['expected_batch_bytes']} bytes did not fit in "
                                f"max_memory={st['max_memory']} bytes with the other batches in flight; the pool "
                                f"grew past its budget (hard cap {st['hard_cap']} bytes). Raise max_memory.")

    def _next_local(self):
        """num_workers=0: fetch and collate in this process, into a slot."""
        index = self._next_index()  # raises StopIteration at the end
        if not hasattr(self, "_local_fetch"):
            from stoker._worker import _Fetcher
            cfg = WorkerConfig(arena=None, worker_id=0, num_workers=0, dataset=self._dataset,
                               is_iterable=self._is_iterable, auto_collation=self._auto_collation,
                               collate_fn=self._wcollate, convert=self._convert, drop_last=self._drop_last,
                               base_seed=self._base_seed, worker_init_fn=None, numpy_mode=self._numpy,
                               parent_pid=os.getpid())
            self._local_cfg = cfg
            self._local_fetch = _Fetcher(cfg)
        if self._is_iterable:
            kind, payload = (N.TASK_ITER_BATCH, len(index)) if self._auto_collation else (N.TASK_ITER_ITEM, None)
        else:
            kind, payload = N.TASK_INDICES, index
        data = self._local_fetch.fetch(kind, payload)
        out = _LocalPort(self._engine, self._numpy)
        publish_batch(out, 0, data, self._local_cfg)
        self._after_batch()
        return out.result

    # ---- misc --------------------------------------------------------------

    def __next__(self):
        t0 = self._stats.now()
        data = self._next_data()
        self._stats.batch(t0)
        self._num_yielded += 1
        if (self._is_iterable and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            warnings.warn(
                f"Length of IterableDataset {self._dataset} was reported to be {self._IterableDataset_len_called} "
                f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ",
                stacklevel=2)
        return data

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(msg, ResourceWarning, stacklevel=4)

    def _pin_new_memory(self):
        committed = self._engine.committed_bytes
        if committed <= self._pinned_upto:
            return
        cudart = torch.cuda.cudart()
        base = self._engine.base_address
        start = self._pinned_upto
        # cudaHostRegisterPortable (1): pinned for every CUDA context.
        err = cudart.cudaHostRegister(base + start, committed - start, 1)
        if int(err) != 0:
            self._warn_once("pin", f"stoker: cudaHostRegister of the slot arena failed ({err}); batches are not pinned")
            self._pin_memory = False
            return
        self._pinned_upto = committed

    def stats(self) -> dict:
        st = self._engine.stats()
        st.update(self._stats.snapshot())
        return st

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


class _LocalPort:
    """The WorkerPort interface for in-process loading: publish() collates into
    a slot of the local engine and decodes the result right away."""

    def __init__(self, engine, numpy_mode):
        self._engine = engine
        self.result = None

    def publish(self, _slot, obj, mode, numpy_mode):
        out = self._engine.fill_local(obj, mode, numpy_mode)
        if out is None:
            return False
        self.result = out
        return True


class _Throughput:
    """Batches/s and the training loop's stall time (time spent in __next__)."""

    def __init__(self):
        import time
        self.now = time.perf_counter
        self.reset()

    def reset(self):
        self.start = self.now()
        self.batches = 0
        self.stall = 0.0

    def batch(self, t0):
        self.batches += 1
        self.stall += self.now() - t0

    def snapshot(self):
        elapsed = max(self.now() - self.start, 1e-9)
        return {"batches": self.batches, "batches_per_s": self.batches / elapsed,
                "stall_s": self.stall, "elapsed_s": elapsed}
