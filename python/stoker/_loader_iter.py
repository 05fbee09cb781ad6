"""The iterator of stoker.DataLoader: one pass (or, with persistent workers,
many) over the loader.  It starts and restarts the worker processes, drives
the native scheduler (a Pump: the sampler's indices out, batches in, in
order), turns worker deaths, errors and timeouts into torch's exceptions
(with more said), and has batches loaded in this process when
num_workers=0.  Split from dataloader.py, which keeps the DataLoader class
(torch's constructor and the resume and stats API).  Its seams live beside
it, each a module: the resume state (_resume.py), the num_workers=0 path
(_local.py), pin_memory's fences (_cuda.py), throughput and the progress
line (_progress.py), the workers (_worker.py), their random state
(_rng_state.py), their reaping (_reaper.py) and OOM diagnosis (_diagnose.py)."""
from __future__ import annotations

import collections
import functools
import logging
import multiprocessing as python_multiprocessing
import os
import pickle
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Optional

import torch
import torch.utils.data
from torch.utils.data.dataloader import _BaseDataLoaderIter, _DatasetKind

from stoker import _cuda, _fork_guard, _local, _reaper, _resume, _sampling, _topology
from stoker import _native as N
from stoker import _autotune
from stoker._diagnose import OomWatch, crash_error, timeout_error
from stoker._progress import Throughput
from stoker._resume import rng_restore, rng_snapshot
from stoker._worker import ArenaHandle, WorkerConfig, is_default, native_source, shard_datapipe, worker_main
from stoker.errors import LoaderTimeout, describe_exit, user_stacklevel

if TYPE_CHECKING:
    from stoker.dataloader import DataLoader  # noqa: F811

# How long a worker busy in user code may take to notice a shutdown before it
# is killed.  Workers hold nothing that needs cleaning up.
_JOIN_GRACE_S = 0.05

logger = logging.getLogger("stoker")


class _StokerIter(_BaseDataLoaderIter):
    """One pass (or, with persistent workers, many passes) over a DataLoader."""

    def __init__(self, loader: DataLoader, own_pass: bool = False):
        self._owner_pid = os.getpid()
        # The thread whose pass this is, until the pass ends (a persistent
        # iterator is not reset under it by another thread: DataLoader.__iter__).
        self._pass_thread: Optional[threading.Thread] = None
        self._shutdown = True  # until the engine exists
        # One thread at a time in next() and reset: the scheduler is
        # single-threaded.  A thread that waits for the lock waits without
        # the GIL, so the one inside keeps going (and timeout= holds).
        self._lock = threading.Lock()
        # Generators this loader's native randperms drew from, not written back
        # yet (_sampling.py); the loader's, so that an epoch left early is
        # settled by the next iterator.
        self._pending_generators = loader.__dict__.setdefault("_stoker_pending_generators",
                                                                              _sampling.Pending())
        # Before torch's __init__ draws this iterator's base seed from the
        # loader's generator: an epoch left early has drawn its permutation.
        _sampling.settle_all(self._pending_generators, complete=False)
        super().__init__(loader)
        if own_pass:  # a second thread's pass beside the persistent iterator: its workers end with it
            self._persistent_workers = False
        # Where this iterator stopped if it is let go of mid-epoch, for the
        # loader's state_dict(): a box the loader owns (a weak reference to
        # the loader would be cleared before a cycle's finalizer runs).
        self._final = loader.__dict__.setdefault("_stoker_final", {})
        self._final_token = object()
        if not own_pass:
            loader._last_iter = weakref.ref(self)
            self._final.clear()
            self._final["owner"] = self._final_token
        self._loader_ref = weakref.ref(loader)
        self._sampler_obj, self._batch_size = loader.sampler, loader.batch_size
        self._loader_epoch = getattr(loader, "_epoch", None)  # (kept by loader.set_epoch too)
        self._rank, self._world_size = loader.rank, loader.world_size
        # sample_seeds=True: each sample's random streams seeded from (seed, epoch, index) (_worker.py).
        self._sample_seed = int(loader.seed) if getattr(loader, "sample_seeds", False) else None
        self._numpy = loader.output == "numpy"
        self._in_order = loader.in_order
        self._is_iterable = self._dataset_kind == _DatasetKind.Iterable
        # A native dataset with the default collate is read by C++ threads
        # (num_workers of them, at least one) instead of worker processes.
        self._native_ds = native_source(loader, self._is_iterable)
        auto = getattr(loader, "_stoker_auto", ())
        if "num_workers" in auto and self._is_iterable:  # (its workers split its stream: a count fixed for the iterator)
            self._num_workers = min(self._num_workers, _autotune.cores())
        if self._native_ds is not None:
            self._num_workers = max(1, self._num_workers)
            if self._native_ds.on_error == "skip" and not self._auto_collation:
                raise ValueError(f"{self._native_ds.describe()} skips bad records (on_error='skip'), which needs "
                                 "batches to leave them out of: give a batch_size (batch_size=None yields "
                                 "single samples)")
        nw = self._num_workers
        # num_workers="auto" with worker processes: the autotuner starts
        # them as it raises their count, up to nw (_autotune.py); a resumed
        # run starts where the saved one was.
        resume = getattr(loader, "_resume", None)
        self._tune_workers = "num_workers" in auto and nw > 0 and not self._is_iterable
        active, depth = _autotune.starting_point(self, loader, resume, auto)
        self._prefetch = depth * max(active, 1)
        # torch's assignment (in order, batch k on worker k mod n): a worker the
        # kernel preempts holds up the batch it owns, and the others run only
        # prefetch_factor batches ahead of it.  With prefetch_factor left to
        # stoker, small batches go deeper (_autotune.deep_prefetch) once the
        # pool has learnt their size; large ones keep torch's depth
        # (docs/benchmarks.md, "Deeper prefetch for small batches").
        self._deepen = (not getattr(loader, "_stoker_prefetch_chosen", True) and not auto and self._in_order
                        and not self._is_iterable and nw >= 2 and self._native_ds is None)
        most = _autotune.MAX_DEPTH * nw if self._deepen or auto else self._prefetch
        # A datapipe is sharded as torch shards it: between ranks here, or
        # between every worker of every rank in the workers.
        self._datapipe = isinstance(self._dataset, (torch.utils.data.IterDataPipe, torch.utils.data.MapDataPipe))
        if self._datapipe and not nw:
            from torch.utils.data.graph_settings import apply_sharding
            apply_sharding(self._dataset, self._world_size, self._rank)
        user_collate = loader._user_collate_fn
        if self._auto_collation:
            self._wcollate = None if is_default(user_collate, "default_collate") else loader.collate_fn
            self._convert = False
        else:
            self._wcollate = None if is_default(user_collate, "default_convert") else loader.collate_fn
            self._convert = self._wcollate is None
        self._max_memory = loader.max_memory
        if resume is not None and resume.get("base_seed") is not None:
            self._base_seed = resume["base_seed"]  # workers seed as in the saved run
        # An IterableDataset resumed mid-epoch: each worker passes over the
        # items of the batches it had delivered.
        per_item = (loader.batch_size or 1) if self._auto_collation else 1
        self._iter_skip = [c * per_item for c in resume.get("per_worker", [])] \
            if resume is not None and self._is_iterable else []
        self._iter_base = list(resume.get("per_worker", [])) if resume is not None and self._is_iterable else []
        # Native readers are threads of this process: the pool needs no
        # shared memory (private memory is quicker to back; shm/arena.h).
        self._engine = N.Engine(nw, loader._pool_memory(self._native_ds is not None), max(256, 4 * most + 64),
                                process_shared=self._native_ds is None)
        if getattr(loader, "_epoch", None) is not None:
            self._engine.set_epoch(loader._epoch)
        self._shutdown = False
        if nw:
            self._pump = N.lib.Pump(self._engine, nw, self._prefetch, self._in_order, self._is_iterable,
                                    self._auto_collation, self._numpy)
            if self._tune_workers:
                self._pump.set_active_workers(active)
        self._warned = set()
        self._cuda_on = False  # pin_memory: the engine pins the pool and fences slots (_fence)
        self._workers = []
        self._oom_watch = []
        self._restarts_left = loader.max_worker_restarts
        self.restarts = []  # one record per replaced worker
        self._stats = Throughput(self._engine, self._pump.no_room_wait_s if self._num_workers else None, self._native_ds)
        # Map-style worker processes record their random state as they go
        # (stoker._rng_state): replacements and resumed runs continue it.
        self._rng_board = None
        self._rng_resume = None
        if nw and self._native_ds is None and not self._is_iterable:
            from stoker._rng_state import RngBoard
            self._rng_board = RngBoard.for_prefetch(nw, most)
            saved = resume.get("worker_rng") if resume is not None else None
            if saved is not None and (resume.get("world_size"), resume.get("batch_size", loader.batch_size)) != \
                    (self._world_size, loader.batch_size):
                saved = None  # another topology: other batches, whose streams were never drawn
            if saved is not None and len(saved) == nw:
                from stoker.distributed import rank_and_world_size
                here = rank_and_world_size()[0]
                if resume.get("worker_rng_rank", 0) == here:
                    self._rng_resume = list(saved)
                else:
                    warnings.warn(
                        f"stoker: this loader state was saved by process rank {resume.get('worker_rng_rank', 0)}, "
                        f"and this is rank {here} (a framework that saves one checkpoint for all ranks, such as "
                        "Lightning, does this): the indices resume exactly, but this rank's workers cannot "
                        "continue their random streams, so augmentations drawn from now on differ from the "
                        "uninterrupted run's on this rank. Save each rank's loader.state_dict() to resume them "
                        "exactly.", UserWarning, stacklevel=4)
        if self._native_ds is not None:
            self._native_workers = N.lib.NativeWorkers(self._engine, self._native_ds, loader.reader_priority,
                                                       start=active if self._tune_workers else 0)
        elif nw > 0:
            self._start_workers(loader, active)  # (a resumed schedule's others: _reset_locked)
        self._tuner = _autotune.Tuner.make(self, loader, auto, active, depth)
        self._reset(loader, first_iter=True)

    # ---- lifecycle -------------------------------------------------------

    def _start_workers(self, loader, count: int):
        self._ctx = loader.multiprocessing_context or python_multiprocessing.get_context()
        self._worker_init_fn = loader.worker_init_fn
        if self._datapipe:
            self._worker_init_fn = functools.partial(shard_datapipe, loader.worker_init_fn, self._world_size,
                                                     self._rank)
        self._workers, self._oom_watch = [None] * self._num_workers, [None] * self._num_workers
        for wid in range(count):
            self._start_worker(wid)

    def _set_active_workers(self, n: int):
        """The autotuner's: new batches go to workers 0..n-1, started if
        need be (one that ran before goes on with its random streams)."""
        for wid in range(n):
            if wid in self._tuner.retiring:
                self._tuner.finish_retiring(wid, wait_s=2.0)
            if self._native_ds is not None:
                self._native_workers.start(wid)  # (C++ reader threads)
            elif self._workers[wid] is None:
                rng = self._rng_board.newest(wid) if self._rng_board is not None else None
                self._start_worker(wid, rng, replacement=rng is not None)
        self._pump.set_active_workers(n)

    def _start_worker(self, wid: int, rng_state: Optional[bytes] = None, replacement: bool = False):
        if not replacement and self._rng_resume is not None:
            rng_state, self._rng_resume[wid] = self._rng_resume[wid], None
        forked = self._ctx.get_start_method() == "fork"
        handle = ArenaHandle(engine=self._engine) if forked else ArenaHandle(fd=self._engine.fd)
        cfg = WorkerConfig(
            arena=handle, worker_id=wid, num_workers=self._num_workers, dataset=self._dataset,
            is_iterable=self._is_iterable, auto_collation=self._auto_collation,
            collate_fn=self._wcollate, convert=self._convert, drop_last=self._drop_last,
            base_seed=self._base_seed, worker_init_fn=self._worker_init_fn,
            numpy_mode=self._numpy, parent_pid=os.getpid(), rank=self._rank, world_size=self._world_size,
            skip_items=self._iter_skip[wid] if wid < len(self._iter_skip) else 0,
            rng_board=self._rng_board, rng_state=rng_state, rng_on_board=replacement and rng_state is not None,
            shared_seed=self._shared_seed, sample_seed=self._sample_seed)
        make = functools.partial(self._ctx.Process, target=worker_main, args=(cfg,), daemon=True,
                                 name=f"stoker-worker-{wid}")
        try:  # (forked: again if the child is stuck in os.fork() itself, _fork_guard)
            w = _fork_guard.start(make, f"DataLoader worker {wid}", forked)
        except (TypeError, AttributeError, pickle.PicklingError):
            # torch's warning, word for word: spawn and forkserver pickle the
            # dataset, collate_fn and worker_init_fn.
            warnings.warn(
                "Got pickle error when attempting to start a worker Process. "
                "This might be because the worker Process arguments are not picklable. "
                "Python 3.14+ changed the multiprocessing start method in non-Mac POSIX platforms "
                "to 'forkserver', which requires the worker Process arguments to be picklable. "
                "You can also try multiprocessing.set_start_method('fork').",
                stacklevel=2)
            raise
        _reaper.guard(w)
        self._engine.watch(wid, w.pid)
        self._workers[wid] = w
        self._oom_watch[wid] = OomWatch(w.pid)

    def _restart_worker(self, wid, pid, code, sig) -> bool:
        """Replaces a dead worker if restarts remain; False if it may not."""
        if self._restarts_left <= 0:
            return False
        self._restarts_left -= 1
        held = sorted(b for b, _i in self._held_by().get(wid, []))
        _, hint = self._oom_watch[wid].verdict(pid, sig)
        logger.warning("stoker: DataLoader worker %d (pid %d) %s%s; starting a replacement (%d restart(s) left) "
                       "and loading its batches %s again", wid, pid, describe_exit(sig, code),
                       f" ({hint})" if hint else "", self._restarts_left, held)
        mine = {b for b, w, _i, _done in self._pump.in_flight() if w == wid}
        self._pump.requeue(wid)
        requeued = sorted(mine - {b for b, w, _i, _done in self._pump.in_flight() if w == wid})
        dead = self._workers[wid]
        _reaper.reap([dead], 0.0)
        rng = self._replacement_rng(wid, requeued)
        self._start_worker(wid, rng, replacement=True)
        self.restarts.append({"worker": wid, "pid": pid, "signal": sig, "exit_code": code, "batches": held,
                              "random_state": "continued" if rng is not None else "seeded"})
        return True

    def _replacement_rng(self, wid: int, requeued) -> Optional[bytes]:
        """The random state the dead worker had before the first batch it
        did not finish: the replacement loads that batch on from there."""
        board = self._rng_board
        if board is None:
            return None
        gen = self._pump.generation
        if not self._in_order or not requeued:
            # Out of order batches go to any worker; a worker that held
            # nothing unfinished: the state after the last batch it read.
            return board.newest(wid)
        prev = self._pump.prev_batch_of(wid, requeued[0])  # (under the schedule of worker counts)
        return board.lookup(wid, gen, prev if prev >= 0 else None)

    def _reset(self, loader, first_iter=False):
        with self._lock:
            try:
                self._reset_locked(loader, first_iter)
            except BaseException:
                # (an epoch that cannot begin, e.g. a state it cannot go on
                # from: its workers end now, not when a cycle is collected)
                self._shutdown_workers()
                raise

    def _busy_in_another_thread(self) -> Optional[str]:
        """The name of another live thread in the middle of a pass over this
        iterator, or None."""
        t = self._pass_thread
        if t is None or t is threading.current_thread() or not t.is_alive() or self._shutdown:
            return None
        return t.name

    def _reset_locked(self, loader, first_iter):
        self._pass_thread = threading.current_thread()
        if self._num_workers or not first_iter:
            # (torch's iterator without workers is not reset when it starts: a
            # datapipe's shared seed is drawn once, in __init__)
            super()._reset(loader, first_iter)
        resume, loader._resume = getattr(loader, "_resume", None), None
        # What the last epoch's native order drew from a generator, written
        # back (an epoch left early) before anything reads or restores it.
        _sampling.settle_all(self._pending_generators, complete=False)
        if resume is not None:
            rng_restore(loader, resume["rng"])
        # The order of this epoch is drawn now, not at the first batch, so the
        # random state saved with it is the one that drew it.
        self._epoch_rng = rng_snapshot(loader)
        # The epoch's order, and for a resumed epoch its rest on this topology.
        asked = resume  # (a rest of the epoch renumbered for another topology or mix is not `asked`)
        self._plan, native_order, resume = _topology.EpochPlan.begin(
            loader, resume, self._is_iterable,
            lambda recipe: _sampling.loader_epoch(loader, self._auto_collation, self._pending_generators, recipe))
        if native_order is None:
            self._sampler_iter = _sampling.eager(self._sampler_iter)
        elif not self._num_workers:  # batches of the native order, with no list of every index
            self._sampler_iter = _sampling.batches(native_order, loader.batch_size, loader.drop_last,
                                                   self._pending_generators)
        if self._native_ds is not None:
            # Native random transforms (stoker.vision) draw from the loader's
            # generator: its seed for this iterator, and a new one per epoch
            # of a persistent iterator (torch's workers' streams go on too).
            # A resumed epoch draws as the saved one did: the state says
            # which epoch of a persistent iterator it was (without it, a
            # later epoch resumed drew as the first).
            if resume is not None and resume.get("native_resets") is not None:
                self._native_resets = int(resume["native_resets"])
            else:
                self._native_resets = 0 if first_iter else self._native_resets + 1
            self._native_ds.set_seed((self._base_seed + 0x9E3779B97F4A7C15 * self._native_resets) % 2 ** 64)
        self._local_skip = set()
        self._delivered_local = 0
        if not first_iter:
            self._iter_base = []  # a resumed epoch's counts belong to that epoch only
        if self._num_workers:
            if self._shared_seed is not None:  # an IterDataPipe's, for the workers' resume (torch draws one per epoch)
                self._engine.set_shared_seed(self._shared_seed & (2 ** 64 - 1))
            # The epoch begins in C++ (EpochRunner), from the resume point if any.
            if resume is not None and self._is_iterable:
                self._resume_next = resume.get("next_worker", 0)
                self._pump.resume_at(next_worker=self._resume_next)
            elif resume is not None:
                saved = _autotune.saved_schedule(self, resume if resume is asked else None, loader.batch_size)
                if saved:
                    self._tuner.resume(saved)
                self._pump.resume_at(resume["delivered"], resume["delivered_extra"], schedule=saved)
            if native_order is not None:  # no Python per sample: the order goes to the scheduler as it is
                self._pump.reset_order(native_order, loader.batch_size or 0, loader.drop_last, not first_iter)
            else:
                self._pump.reset(self._sampler_iter, not first_iter)
        elif resume is not None and not self._is_iterable:
            self._local_skip = set(range(resume["delivered"])) | set(resume["delivered_extra"])
        self._stats.reset()
        self._close_progress()
        if loader.progress:
            from stoker._progress import Progress
            try:
                total = len(loader)
            except TypeError:
                total = None
            self._progress = Progress(self.stats, total)

    def _close_progress(self):
        progress, self._progress = getattr(self, "_progress", None), None
        if progress is not None:
            progress.close()

    def _shutdown_workers(self):
        if self._shutdown or os.getpid() != self._owner_pid:
            # Already done, or this is a forked copy (the cyclic GC can collect
            # an old iterator inside a new worker): the parent owns the workers.
            return
        self._shutdown = True
        self._close_progress()
        engine = getattr(self, "_engine", None)
        if engine is None:
            return
        if self._pass_thread is not None and self._final.get("owner") is self._final_token:
            # Let go of mid-epoch (a loop that broke out, a crash): where it
            # stopped stays the loader's state_dict().
            try:
                self._final["state"] = self.resume_state()
            except Exception:  # noqa: BLE001 - a state must never fail a shutdown
                pass
        loader = self._loader_ref()
        if loader is not None:  # loader.stats() describes the last iterator once it is gone too
            try:
                # Without the /proc reads: each walks its process's page
                # tables (a forked worker maps the parent's memory too), and
                # this runs as the loop's epoch ends: 42-51 ms with 4 workers
                # of a 1 GiB process, 119-126 ms of a 4 GiB one (bench/epoch_end.py).
                loader._final_stats = self.stats(memory=False)
            except Exception:  # noqa: BLE001 - statistics must never fail a shutdown
                pass

        for wid in range(len(self._workers)):
            engine.forget(wid)
        engine.shutdown()  # every worker wakes up and leaves
        native = getattr(self, "_native_workers", None)
        if native is not None:
            native.stop()  # threads: they leave at once, nothing to reap
        _reaper.reap(self._workers, _JOIN_GRACE_S)
        pump = getattr(self, "_pump", None)
        if pump is not None:
            pump.clear()
        board = getattr(self, "_rng_board", None)
        if board is not None:
            board.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass

    # ---- iteration -------------------------------------------------------

    def _next_data(self):
        if self._num_workers == 0:
            try:
                return _local.next_local(self)
            except StopIteration:
                self._pass_thread = None  # the epoch is over, not left mid-way
                raise
        if self._shutdown:
            raise StopIteration
        code, value = self._pump.next(self._timeout if self._timeout > 0 else -1.0)
        if code == _BATCH:  # the common case first, with no call in between
            if self._deepen:
                self._deepen_for(self._engine.expected_batch_bytes)
            return value
        # A loop, not a recursion: a storm of worker deaths inside one next()
        # must not grow the stack (replacements are forked from it).
        while True:
            data = self._outcome(code, value)
            if data is not _AGAIN:
                return data
            if self._shutdown:
                raise StopIteration
            code, value = self._pump.next(self._timeout if self._timeout > 0 else -1.0)

    def _deepen_for(self, batch_bytes: int):
        """Once: the small-batch depth (_autotune.deep_prefetch)."""
        if batch_bytes <= 0:
            return
        self._deepen = False
        depth = _autotune.deep_prefetch(self._max_memory, self._num_workers, batch_bytes)
        if depth * self._num_workers > self._prefetch:
            self._pump.prefetch = depth * self._num_workers

    def _outcome(self, code, value):
        """What pump.next()'s (code, value) means: a batch, or an exception,
        or _AGAIN (a dead worker was replaced: wait for the next outcome)."""
        if code == _BATCH:
            return value
        if code == N.PumpCode.BATCH_FLAGGED:
            batch, flags = value
            self._warn_flags(flags)
            return batch
        if code == N.PumpCode.END:
            self._pass_thread = None
            _sampling.settle_all(self._pending_generators)  # a generator the epoch drew from: as torch leaves it
            if not self._persistent_workers:
                self._shutdown_workers()
            raise StopIteration
        if code == N.PumpCode.ERROR:
            report, _wid, _bid, _index = value
            pickle.loads(report).reraise()
        if code == N.PumpCode.WORKER_EXIT:
            if self._restart_worker(*value):
                return _AGAIN
            self._raise_crash(*value)
        if code == N.PumpCode.TIMEOUT:
            self._raise_timeout()
        raise AssertionError(f"stoker: unknown pump outcome {code}")

    def _held_by(self):
        """Each worker's unfinished batches (a finished one waiting for its
        turn is no longer the worker's: its death loses nothing)."""
        held = collections.defaultdict(list)
        for bid, wid, idx, done in self._pump.in_flight():
            if not done:
                held[wid].append((bid, idx))
        return held

    def _raise_crash(self, wid, pid, code, sig):
        watch = self._oom_watch[wid] if wid < len(self._oom_watch) else None
        error = crash_error(self._held_by().get(wid, []), wid, pid, code, sig, watch)
        self._shutdown_workers()
        raise error

    def _raise_timeout(self):
        raise timeout_error(self._held_by(), self._workers, self._timeout)

    def _warn_flags(self, flags: int):
        if flags & 1:
            self._warn_once("copy", "stoker: the training loop holds so many batches that the slot pool "
                            f"(max_memory={self._max_memory} bytes) would run out; further batches are copied "
                            "out of shared memory. Drop references to old batches or raise max_memory.")

    # ---- misc --------------------------------------------------------------

    def __next__(self):
        if not self._lock.acquire(False) and \
                not self._lock.acquire(timeout=self._timeout if self._timeout > 0 else -1):
            raise LoaderTimeout(f"DataLoader timed out after {self._timeout} seconds waiting for another thread's "
                                "next() on the same iterator to return")
        try:
            return self._next_locked()
        finally:
            self._lock.release()

    def _next_locked(self):
        t0 = self._stats.now()
        if self._pin_memory:
            _cuda.fence(self)
        try:
            data = self._next_data()
        except StopIteration:
            self._close_progress()
            raise
        if self._cuda_on and self._engine.pin_error:
            _cuda.pin_failed(self)
        self._stats.batch(t0)
        if self._tuner is not None:
            self._tuner.tick()
        if self._progress is not None:
            self._progress.update()
        self._num_yielded += 1
        if (self._is_iterable and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            # torch's wording, word for word (its test suite matches it).
            msg = (f"Length of IterableDataset {self._dataset} was reported to be {self._IterableDataset_len_called}"
                   f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                        "IterableDataset replica at each worker. Please see "
                        "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset for examples.")
            warnings.warn(msg, stacklevel=3)
        return data

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(msg, ResourceWarning, stacklevel=user_stacklevel())

    def _shutdown_for_good(self) -> bool:
        return self._shutdown and not self._persistent_workers

    def resume_state(self) -> dict:
        return _resume.iterator_state(self)

    def stats(self, memory: bool = True) -> dict:
        st = self._engine.stats(memory)
        if self._num_workers:
            q = self._pump.queue_depths()
        else:
            q = {"in_progress": 0, "reorder_buffer": 0, "spilled": 0, "retry": 0}
        q["per_worker"] = [w["queued"] for w in st["workers"]]
        st["queues"] = q
        st["throughput"] = self._stats.snapshot(st["delivered_bytes"])
        st["bottleneck"] = self._stats.verdict(st)  # (stoker/_verdict.py)
        if self._tuner is not None:
            st["autotune"] = self._tuner.stats()
        if memory:
            st["tree_pss"] = st["main"]["pss"] + sum(w["pss"] for w in st["workers"])
        counts = self._plan.counts if getattr(self, "_plan", None) is not None else None
        if counts is not None:
            st["epoch_order"] = dict(counts)
        if self._native_ds is not None:
            # Native reader threads: bad records skipped (on_error="skip").
            st["native"] = {"threads": self._pump.active_workers, "skipped": self._native_ds.skipped,
                            "last_skipped": self._native_ds.last_skipped}
        return st

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


_AGAIN = object()  # _outcome: a worker was replaced; wait again
_BATCH = int(N.PumpCode.BATCH)  # (compared on every batch: a plain int)
