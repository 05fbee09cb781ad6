"""The worker process: takes tasks from its ring, runs the dataset and writes
batches straight into shared-memory slots.

Started by multiprocessing (fork, spawn or forkserver).  Seeds, worker info,
thread count and signal handling follow torch's own worker loop, so datasets
that rely on them behave the same.
"""
from __future__ import annotations

import gc
import itertools
import os
import pickle
import random
import signal
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from stoker import _native as N
from stoker.errors import ErrorReport, short_repr

# The codes compared on every task, as plain ints taken from their IntEnums
# (python/bindings/bind_codes.cc): an enum member's lookup costs about 0.1 us.
_INDICES, _INDEX, _ITER_BATCH, _PICKLED_INDEX = (int(N.TaskKind.INDICES), int(N.TaskKind.INDEX),
                                                 int(N.TaskKind.ITER_BATCH), int(N.TaskKind.PICKLED_INDEX))
_COLLATE, _PRESERVE = int(N.PublishMode.COLLATE), int(N.PublishMode.PRESERVE)
_FALLBACK, _CANCELLED = int(N.PublishOutcome.FALLBACK), int(N.PublishOutcome.CANCELLED)
_RESUME, _ITER_ITEM = int(N.TaskMsg.RESUME), int(N.TaskKind.ITER_ITEM)



class ArenaHandle:
    """How a worker reaches the arena: the engine itself under fork, the
    memfd (passed with multiprocessing's fd passing) under spawn/forkserver."""

    def __init__(self, engine=None, fd: Optional[int] = None):
        self.engine = engine
        self.fd = fd if fd is not None else engine.fd

    def __reduce__(self):
        from multiprocessing import reduction
        return (ArenaHandle._rebuild, (reduction.DupFd(self.fd),))

    @staticmethod
    def _rebuild(dupfd):
        return ArenaHandle(fd=dupfd.detach())

    def port(self, worker_id: int):
        if self.engine is not None:
            return N.WorkerPort.from_engine(self.engine, worker_id)
        port = N.WorkerPort.attach(self.fd, worker_id)
        os.close(self.fd)  # the port holds its own duplicate
        return port


@dataclass
class WorkerConfig:
    arena: ArenaHandle
    worker_id: int
    num_workers: int
    dataset: Any
    is_iterable: bool
    auto_collation: bool
    collate_fn: Optional[Callable]   # None: stoker's native default_collate
    convert: bool                    # default_convert (batch_size=None, no collate_fn)
    drop_last: bool
    base_seed: int
    worker_init_fn: Optional[Callable]
    numpy_mode: bool
    parent_pid: int
    rank: int = 0
    world_size: int = 1
    skip_items: int = 0    # iterable dataset resumed mid-epoch: items this worker delivered before
    rng_board: Any = None  # map-style: stoker._rng_state.RngBoard, where the worker records its random state
    rng_state: Optional[bytes] = None  # a replacement or resumed worker starts from this state
    rng_on_board: bool = False  # rng_state was read from rng_board (a replacement)
    shared_seed: Optional[int] = None  # an IterDataPipe's: the seed its random operations share (as torch's)
    sample_seed: Optional[int] = None  # sample_seeds=True: the loader's seed, each sample's streams seeded from it
    epoch_of: Optional[Callable] = None  # the loader's epoch (set_epoch), for sample_seeds


def _seed_like_torch(cfg: WorkerConfig):
    seed = cfg.base_seed + cfg.worker_id
    random.seed(seed)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        from torch.utils.data._utils import worker as tw
        tw._worker_info = tw.WorkerInfo(id=cfg.worker_id, num_workers=cfg.num_workers, seed=seed,
                                        dataset=cfg.dataset)
        if N.HAVE_NUMPY:
            import numpy as np
            np.random.seed(tw._generate_state(cfg.base_seed, cfg.worker_id))
    elif N.HAVE_NUMPY:
        import numpy as np
        np.random.seed(seed % (2 ** 32))
    from stoker import _worker_info
    _worker_info.set(cfg.worker_id, cfg.num_workers, seed, cfg.dataset, cfg.rank, cfg.world_size)


def _seed_datapipe(cfg: WorkerConfig, seed: Optional[int]):
    """An IterDataPipe's random operations (shuffle) take the seed that every
    worker shares for this iteration, as in torch's workers."""
    if seed is None or not N.HAVE_TORCH:
        return
    from torch.utils.data import IterDataPipe
    if isinstance(cfg.dataset, IterDataPipe):
        import torch
        from torch.utils.data.graph_settings import apply_random_seed
        cfg.dataset = apply_random_seed(cfg.dataset, torch.Generator().manual_seed(seed))


def shard_datapipe(worker_init_fn, world_size: int, rank: int, worker_id: int):
    """A datapipe's worker_init_fn, as torch wraps it: each worker of each
    rank reads its own shard (ranks first, then the workers within one)."""
    from torch.utils.data import get_worker_info
    from torch.utils.data.graph_settings import apply_sharding
    info = get_worker_info()
    apply_sharding(info.dataset, info.num_workers * world_size, worker_id * world_size + rank)
    if worker_init_fn is not None:
        worker_init_fn(worker_id)


_MASK64 = (1 << 64) - 1


def sample_seed(seed: int, epoch: int, index) -> int:
    """The seed of sample `index` in `epoch` (sample_seeds=True): a function of
    the three alone (core/mix.h's SampleSeed), so that a sample draws the same
    whatever the rank, worker or resume that loads it."""
    if isinstance(index, int):
        word = index & _MASK64
    else:  # (str's hash() differs between processes: a digest of its pickle)
        import hashlib
        word = int.from_bytes(hashlib.blake2b(pickle.dumps(index), digest_size=8).digest(), "little")
    return N.lib.sample_seed(seed & _MASK64, epoch & _MASK64, word)


def seed_streams(seed: int) -> None:
    """Seeds Python's `random`, numpy's global generator and torch's default
    CPU generator, as a worker's are seeded."""
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed & 0xFFFF_FFFF)
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover
        pass


class _Fetcher:
    def __init__(self, cfg: WorkerConfig):
        self.cfg = cfg
        self.dataset_iter = iter(cfg.dataset) if cfg.is_iterable else None
        self.ended = False
        if self.dataset_iter is not None and cfg.skip_items:
            # Resumed mid-epoch: pass over what was delivered before (once).
            next(itertools.islice(self.dataset_iter, cfg.skip_items, cfg.skip_items), None)
            cfg.skip_items = 0

    def fetch(self, kind: int, payload):
        cfg = self.cfg
        if cfg.is_iterable:
            if self.ended:
                raise StopIteration
            if kind == _ITER_BATCH:
                data = []
                for _ in range(payload):
                    try:
                        data.append(next(self.dataset_iter))
                    except StopIteration:
                        self.ended = True
                        break
                if not data or (cfg.drop_last and len(data) < payload):
                    raise StopIteration
                return data
            return next(self.dataset_iter)
        index = pickle.loads(payload) if kind == _PICKLED_INDEX else payload
        if cfg.sample_seed is not None:
            # Each sample's streams from (seed, epoch, index): no __getitems__,
            # which would draw for several samples at once.
            epoch = cfg.epoch_of() if cfg.epoch_of is not None else 0
            if not cfg.auto_collation:
                seed_streams(sample_seed(cfg.sample_seed, epoch, index))
                return cfg.dataset[index]
            out = []
            for i in index:
                seed_streams(sample_seed(cfg.sample_seed, epoch, i))
                out.append(cfg.dataset[i])
            return out
        if cfg.auto_collation:
            getitems = getattr(cfg.dataset, "__getitems__", None)
            if getitems:
                return getitems(index)
            return [cfg.dataset[i] for i in index]
        return cfg.dataset[index]


class _EpochFollower:
    """Calls dataset.set_epoch(e) in this worker when loader.set_epoch(e)
    changed the epoch, before the worker produces anything of that epoch."""

    def __init__(self, dataset, port):
        self.set_epoch = getattr(dataset, "set_epoch", None)
        self.port = port
        self.seen = -1

    def follow(self):
        if self.set_epoch is None:
            return
        e = self.port.epoch
        if e != self.seen and e >= 0:
            self.seen = e
            self.set_epoch(e)


def _default_collate_py(samples, numpy_mode):
    if numpy_mode or not N.HAVE_TORCH:
        from stoker._collate_np import default_collate
        return default_collate(samples)
    from torch.utils.data import default_collate
    return default_collate(samples)


def _default_convert_py(data, numpy_mode):
    if numpy_mode or not N.HAVE_TORCH:
        return data
    from torch.utils.data import default_convert
    return default_convert(data)


def prepare_batch(data, cfg: WorkerConfig):
    """Runs the user's collate_fn (or default_convert) on the fetched samples:
    (object, mode) to publish.  The default collate runs at publish, in C++."""
    if cfg.collate_fn is not None:
        return cfg.collate_fn(data), _PRESERVE
    if cfg.convert:
        return _default_convert_py(data, cfg.numpy_mode), _PRESERVE
    return data, _COLLATE


def publish_prepared(port, slot: int, prepared, cfg: WorkerConfig) -> bool:
    """Writes a prepare_batch() result into `slot` and publishes it.

    Returns False when the main process had no room for it and took the task
    back (it will be sent again)."""
    obj, mode = prepared
    r = port.publish(slot, obj, mode, cfg.numpy_mode)
    if r == _FALLBACK and mode == _COLLATE:
        r = port.publish(slot, _default_collate_py(obj, cfg.numpy_mode), _PRESERVE, cfg.numpy_mode)
    return r != _CANCELLED


def _task_description(batch_id, kind, payload) -> str:
    if kind == _INDICES or kind == _INDEX:
        return f"batch {batch_id} (indices {short_repr(payload)})"
    if kind == _PICKLED_INDEX:
        try:
            return f"batch {batch_id} (indices {short_repr(pickle.loads(payload))})"
        except Exception:
            return f"batch {batch_id}"
    return f"batch {batch_id} (iterable dataset)"


def worker_main(cfg: WorkerConfig):
    # Everything a forked worker inherited is the parent's: move it out of
    # the collector's reach, so collections here never write to those objects
    # (a collection writes to every object it visits, and each write copies a
    # page of the parent's heap into this worker).  Cheap: it moves list heads.
    gc.freeze()
    # Ctrl-C goes to the whole process group; the main process handles it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        N.lib.start_parent_watch(cfg.parent_pid, 0)
    except Exception:
        os._exit(0)  # the parent is already gone
    port = cfg.arena.port(cfg.worker_id)
    N.lib.trace_name_process(f"worker {cfg.worker_id}")  # (its track in a trace: stoker/_trace.py)
    N.lib.trace_name_thread(f"worker {cfg.worker_id}")
    if cfg.sample_seed is not None:
        cfg.epoch_of = lambda: max(0, port.epoch)  # the loader's set_epoch (0 before any)
    pid = os.getpid()
    where = f"in DataLoader worker process {cfg.worker_id} (pid {pid})"
    init_error = None      # reported with the first task, like torch
    started = False        # seeding and worker_init_fn succeeded (else permanent)
    fetcher = None
    epoch = _EpochFollower(cfg.dataset, port)
    board = cfg.rng_board
    recorder = None
    if board is not None:
        from stoker._rng_state import BEFORE, START, Recorder
    gen_seen = None
    # Batches prepared but not published (no room in the pool): the task comes
    # back and gets these, so nothing is read, collated or drawn twice.
    stash = {}
    try:
        _seed_datapipe(cfg, cfg.shared_seed)
        _seed_like_torch(cfg)
        if cfg.worker_init_fn is not None:
            cfg.worker_init_fn(cfg.worker_id)
        if cfg.rng_state is not None:
            from stoker._rng_state import restore
            restore(cfg.rng_state)
        if board is not None:
            recorder = Recorder()
            board.start_writer(cfg.worker_id)
            if not cfg.rng_on_board:  # (a replacement's state is: it was looked up there)
                board.record(cfg.worker_id, 0, START, recorder.current())
        started = True
        epoch.follow()
        fetcher = _Fetcher(cfg)
    except Exception as e:
        init_error = ErrorReport(e, where + (" in iter(dataset)" if started else " during start-up (worker_init_fn)"))
    iteration_end = False
    init_reported = False
    try:
        while True:
            task = port.next_task()
            if task is None:
                break
            msg, slot, batch_id, gen, kind, payload = task
            if msg == _RESUME:
                iteration_end = False
                if started:  # a new epoch gets a new iterator; a failed init stays failed
                    try:
                        _seed_datapipe(cfg, port.shared_seed if cfg.shared_seed is not None else None)
                        epoch.follow()
                        fetcher = _Fetcher(cfg)
                        init_error, init_reported = None, False
                    except Exception as e:
                        init_error, init_reported = ErrorReport(e, where + " in iter(dataset)"), False
                continue
            if init_error is not None:
                # Reported with the first task, like torch.  After that, an
                # iterable-dataset worker without an iterator has no data (the
                # others go on); a map-style one reports the same error again.
                if init_reported and cfg.is_iterable:
                    port.publish_stop(slot)
                else:
                    port.publish_error(slot, init_error.to_bytes())
                    init_reported = True
                continue
            if iteration_end:
                port.publish_stop(slot)
                continue
            if gen != gen_seen:
                gen_seen = gen
                stash = {}
                if recorder is not None:
                    board.record(cfg.worker_id, gen, BEFORE, recorder.current())
            try:
                prepared = stash.pop((gen, -1 if cfg.is_iterable else batch_id), None) if stash else None
                if prepared is None:
                    epoch.follow()
                    try:
                        data = fetcher.fetch(kind, payload)
                        if cfg.collate_fn is not None:  # (stoker's own collation: publish begins it)
                            port.begin_collate()
                        prepared = prepare_batch(data, cfg)
                        data = None
                    finally:
                        if recorder is not None and recorder.after_batch():  # what the next batch starts from
                            board.record(cfg.worker_id, gen, batch_id, recorder.blob)
                if not publish_prepared(port, slot, prepared, cfg):
                    stash[(gen, -1 if cfg.is_iterable else batch_id)] = prepared
                prepared = None
            except Exception as e:
                if isinstance(e, StopIteration) and cfg.is_iterable:
                    iteration_end = True
                    port.publish_stop(slot)
                else:
                    report = ErrorReport(e, f"{where} while loading {_task_description(batch_id, kind, payload)}")
                    port.publish_error(slot, report.to_bytes())
                del e
    except KeyboardInterrupt:
        pass
    # Leave at once: the worker owns nothing that needs cleaning up (the arena
    # is the main process's), and multiprocessing's exit path costs
    # milliseconds the main process would wait for.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


def is_default(fn, name: str) -> bool:
    """fn is torch's default_collate / default_convert (or None)."""
    import torch.utils.data
    return fn is None or fn is getattr(torch.utils.data, name, None) or \
        fn is getattr(torch.utils.data._utils.collate, name, None)


def native_source(loader, is_iterable):
    """The C++ dataset to read with threads, or None to use worker processes
    (any Python in the way: a collate_fn, worker_init_fn or transform of the
    user's)."""
    from stoker.io import NativeDataset
    ds = loader.dataset
    if is_iterable or not isinstance(ds, NativeDataset) or loader.worker_init_fn is not None:
        return None
    if getattr(ds, "_transform", None) is not None:  # a Python transform (StreamingDataset(transform=))
        return None
    if not getattr(ds, "_native_loadable", True):  # stoker.vision: a Python transform, or images of many sizes
        return None
    collate = loader._user_collate_fn
    if not (is_default(collate, "default_collate") or is_default(collate, "default_convert")):
        return None
    return ds._native
