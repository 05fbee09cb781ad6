"""stoker.DataLoader: a drop-in replacement for torch.utils.data.DataLoader.

The constructor *is* torch's (stoker subclasses it), so arguments, defaults,
validation, error messages, samplers, len() and the generator's use are
torch's own.  What changes is the iterator: workers collate straight into a
shared-memory slot pool and the training loop receives tensors that are views
of those slots, with no pickling and no copy (the iterator: _loader_iter.py).
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Optional, TypeVar

import torch
import torch.utils.data
from torch.utils.data import IterableDataset

from stoker import _autotune, _native as N
from stoker import _topology
from stoker._loader_iter import _StokerIter
from stoker._resume import STATE_VERSION, rng_snapshot
from stoker.errors import user_stacklevel

#: Default byte budget of the slot pool (documented in README.md), lowered
#: to a quarter of the machine's (or container's) memory where that is less.
#: (The engine's constant: src/loader/engine.h.)
DEFAULT_MAX_MEMORY = N.Engine.DEFAULT_MAX_MEMORY


def default_max_memory() -> int:
    return N.Engine.default_max_memory()  # min(DEFAULT_MAX_MEMORY, a quarter of the memory limit)



_T_co = TypeVar("_T_co", covariant=True)

#: The loaders stoker.accelerate is preparing in this thread (their ids):
#: accelerate reading them then is not a silent rebuild (no warning).
accelerate_preparing = threading.local()


class DataLoader(torch.utils.data.DataLoader[_T_co]):
    """torch.utils.data.DataLoader, fed through stoker's shared-memory engine.

    Every argument of torch's DataLoader is accepted with torch's meaning and
    default.  Extra keyword-only arguments:

    max_memory: bytes of shared memory the loader may use, all of it
        (default 1 GiB, or a quarter of the machine's or container's memory
        if that is less).  A hard bound: the slot pool never holds more.  A
        batch larger than the budget is an error naming its indices; batches
        the training loop keeps past the budget are copied out of the pool.
        A dataset that keeps decoded data of its own (stoker.io.ParquetDataset:
        its decoded row groups, `memory_bytes`) takes its part out of
        max_memory first (in each worker process that reads it), and the
        slot pool has the rest.
    output: "torch" (default) for torch tensors, "numpy" for numpy arrays.
    progress: show a live line while iterating (tqdm where installed) with
        batches/s, MB/s, the share of time the loop waits for data, the pool's
        shared memory, the process tree's PSS and the stage that bounds the
        loop; at the end of each epoch, a summary with the bottleneck verdict
        and what to change.
    shuffle: as torch's (True: torch's RandomSampler order, drawn natively:
        the same indices, no Python list of them, the first batch at once),
        or "scalable": stoker.sampling.ScalableShuffleSampler, a shuffle in
        memory that does not grow with the dataset, in an order of its own
        (for 10^9 samples and more; docs/scaling.md).
    distributed: shard across the ranks of a job (rank and world size from
        torch.distributed or RANK / WORLD_SIZE): a map-style dataset in torch's
        DistributedSampler order (stoker.distributed.ShardedSampler) with
        `shuffle`, `seed` and `even_split`
        ("pad" repeats samples so every rank has as many, "drop" drops the
        tail); an IterableDataset sees rank and world_size in
        stoker.get_worker_info() and splits itself (stoker.distributed.shard).

    state_dict() / load_state_dict(): resume mid-epoch, exactly, also on
        another number of ranks, workers or batch size (see docs/resume.md).
    sample_seeds: seed Python's `random`, numpy's global generator and
        torch's before each sample's __getitem__ from (seed, epoch, index),
        epoch being set_epoch's (0 before it): a sample draws the same
        augmentation whatever the rank, worker, batch size or resume that
        loads it (off by default: torch's per-worker streams, equal to
        torch's).  Map-style datasets; __getitems__ is not called.
    max_worker_restarts: how many times, per iterator, a worker that dies is
        replaced (default 0: raise stoker.WorkerCrashed).  The batches it held
        are loaded again, so every index is still delivered exactly once and in
        order.  Map-style datasets only.
    num_workers="auto", prefetch_factor="auto": the autotuner chooses them
        as the loader runs, within max_memory and the cores (start small,
        add workers or prefetch while the loop waits and it helps, take them
        away when it does not, again when the workload changes; every
        decision in stats()["autotune"]; docs/autotune.md).  num_workers
        reads as the most it may start (max(8, cores)), and so does
        get_worker_info().num_workers.
    reader_priority: for stoker.io datasets read by C++ threads: "normal"
        (default), "low" (nice 10) or "idle" (SCHED_IDLE: the threads only
        take CPU that nothing else in the process wants, so the training loop
        never waits for them; a process that keeps every core busy starves
        them).  See docs/native_io.md.
    """

    def __new__(cls, dataset=None, *args, **kwargs):
        # A dataset may name the DataLoader subclass that serves it: a Pack of
        # a TextDataset, whose sequences are known only as its text is
        # tokenized, is batched by a loader of its own (stoker/text_stream.py).
        own = getattr(type(dataset), "stoker_loader", None)
        if cls is DataLoader and own is not None:
            return super().__new__(own())
        return super().__new__(cls)

    def __init__(self, dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool | str] = None,
                 sampler=None, batch_sampler=None, num_workers: int | str = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: Optional[int | str] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 max_memory: Optional[int] = None, output: str = "torch", max_worker_restarts: int = 0,
                 progress: bool = False, distributed: bool = False, seed: int = 0, even_split: str = "pad",
                 reader_priority: str = "normal", sample_seeds: bool = False):
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        # "auto": the autotuner's (stoker/_autotune.py); torch sees the most
        # workers it may start, and its default prefetch.
        self._stoker_auto = tuple(k for k, v in (("num_workers", num_workers), ("prefetch_factor", prefetch_factor))
                                  if v == _autotune.AUTO)
        if isinstance(num_workers, str) or isinstance(prefetch_factor, str):
            _autotune.check("num_workers", num_workers, allow_zero=True)
            _autotune.check("prefetch_factor", prefetch_factor, allow_zero=False)
            num_workers = _autotune.max_workers() if num_workers == _autotune.AUTO else num_workers
            prefetch_factor = None if prefetch_factor == _autotune.AUTO else prefetch_factor
        from stoker.distributed import rank_and_world_size
        self.rank, self.world_size = rank_and_world_size() if distributed else (0, 1)
        from stoker.streaming import streaming_source
        stream = streaming_source(dataset)

        def pad() -> bool:
            """even_split, for a sampler stoker builds: pad (True) or drop."""
            if even_split not in ("pad", "drop"):
                raise ValueError(f"even_split should be 'pad' or 'drop', but got {even_split!r}")
            return even_split == "pad"
        from stoker.mix import Mix, MixSampler
        if isinstance(dataset, Mix) and shuffle == "scalable":
            raise ValueError("shuffle='scalable' would shuffle a Mix's positions and lose its proportions: "
                             "shuffle=True shuffles each of its sources instead")
        if isinstance(dataset, Mix) and (sampler is None or isinstance(sampler, MixSampler)) and batch_sampler is None:
            # The mixed epoch's order is made here, once: the workers (or C++
            # threads) read its global indices from the sources laid end to
            # end.  Its positions stay in order (its prefixes keep the
            # weights); shuffle=True shuffles each source's samples.
            if sampler is None:
                sampler = MixSampler(dataset, shuffle=bool(shuffle), rank=self.rank, world_size=self.world_size,
                                     pad=pad())
            dataset.size_caches(shuffle=bool(shuffle), readers=num_workers)
            self.mix, dataset, shuffle = dataset, dataset._by_index(), None
        elif isinstance(dataset, Mix) and shuffle is not None:
            # (a sampler of the user's over its positions)
            dataset.shuffle, shuffle = bool(shuffle), None
        from stoker.sampling import ScalableShuffleSampler
        if shuffle == "scalable":
            if sampler is not None or batch_sampler is not None:
                raise ValueError("shuffle='scalable' builds the sampler: pass no sampler or batch_sampler")
            if stream is not None or isinstance(dataset, IterableDataset):
                raise ValueError("shuffle='scalable' is for map-style datasets (a StreamingDataset shuffles its "
                                 "shards: shuffle=True)")
            sampler = ScalableShuffleSampler(dataset, seed=seed, num_replicas=self.world_size, rank=self.rank,
                                             drop_last=not pad())
            shuffle = None
        from stoker.parquet import parquet_source
        own = stream if stream is not None else parquet_source(dataset)
        if own is not None and sampler is None and batch_sampler is None:
            # A streaming dataset's epochs come shard by shard, a Parquet
            # dataset's row group by row group, in its order.
            sampler = own.sampler(shuffle=bool(shuffle), seed=seed, rank=self.rank, world_size=self.world_size,
                                  pad=pad())
            if hasattr(own, "size_cache"):  # (a ParquetDataset's decoded row groups: what these epochs hold)
                own.size_cache(shuffle=bool(shuffle), readers=num_workers)
            shuffle = None
        elif distributed and not isinstance(dataset, IterableDataset) and not \
                isinstance(sampler, (ScalableShuffleSampler, MixSampler)):
            if sampler is not None or batch_sampler is not None:
                raise ValueError("distributed=True builds the sampler: pass no sampler or batch_sampler "
                                 "(or pass your DistributedSampler without distributed=True)")
            from stoker.distributed import sharded_sampler
            sampler = sharded_sampler(dataset, num_replicas=self.world_size, rank=self.rank, shuffle=bool(shuffle),
                                      seed=seed, drop_last=not pad())
            shuffle = None
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                         batch_sampler=batch_sampler, num_workers=num_workers, collate_fn=collate_fn,
                         pin_memory=pin_memory, drop_last=drop_last, timeout=timeout,
                         worker_init_fn=worker_init_fn, multiprocessing_context=multiprocessing_context,
                         generator=generator, prefetch_factor=prefetch_factor,
                         persistent_workers=persistent_workers, pin_memory_device=pin_memory_device,
                         in_order=in_order)
        # (torch makes an unset prefetch_factor 2: whether the user chose it)
        self._stoker_prefetch_chosen = prefetch_factor is not None
        if max_memory is None:
            max_memory = default_max_memory()
        if not isinstance(max_memory, int) or isinstance(max_memory, bool) or max_memory < (1 << 20):
            raise ValueError(f"max_memory should be an int of at least 1 MiB (1048576 bytes), but got {max_memory!r}")
        N.Engine.check_max_memory(max_memory)
        if output not in ("torch", "numpy"):
            raise ValueError(f"output should be 'torch' or 'numpy', but got {output!r}")
        if not isinstance(max_worker_restarts, int) or max_worker_restarts < 0:
            raise ValueError(f"max_worker_restarts should be a non-negative int, but got {max_worker_restarts!r}")
        if max_worker_restarts and isinstance(dataset, IterableDataset):
            raise ValueError("max_worker_restarts needs a map-style dataset: an IterableDataset's stream "
                             "cannot be resumed in a replacement worker")
        self.max_memory = max_memory
        self._pool_memory(native=True)  # (a dataset's own part leaves room for batches: checked now)
        self.output = output
        self.max_worker_restarts = max_worker_restarts
        if reader_priority not in ("normal", "low", "idle"):
            raise ValueError(f"reader_priority should be 'normal', 'low' or 'idle', but got {reader_priority!r}")
        self.reader_priority = reader_priority
        self.progress = bool(progress)
        if sample_seeds and isinstance(dataset, IterableDataset):
            raise ValueError("sample_seeds=True seeds each sample from its index: it needs a map-style dataset "
                             "(an IterableDataset's items have none)")
        self.sample_seeds = bool(sample_seeds)
        self.seed = int(seed)
        # torch's __init__ replaces a missing collate_fn with its default;
        # remember whether the user gave one so the native collate can run.
        self._user_collate_fn = collate_fn

    def _stoker_options(self) -> dict:
        """The keyword arguments of stoker's own that rebuild this loader
        (stoker.accelerate passes them when accelerate rebuilds it)."""
        return {"max_memory": self.max_memory, "output": self.output, "max_worker_restarts": self.max_worker_restarts,
                "progress": self.progress, "reader_priority": self.reader_priority, "sample_seeds": self.sample_seeds,
                "seed": self.seed}

    # accelerate's prepare_data_loader reads every torch argument of a loader
    # to build a new one; pin_memory_device is read by little else, so its
    # read from accelerate's code is how a silent rebuild is noticed.
    @property
    def pin_memory_device(self) -> str:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("accelerate.") and not getattr(self, "_rebuild_warned", False):
            if id(self) not in (getattr(accelerate_preparing, "ids", None) or ()):
                self._rebuild_warned = True
                warnings.warn(
                    "stoker: accelerate is rebuilding this stoker.DataLoader on torch's DataLoader "
                    "(accelerate's DataLoaderShard): stoker's workers, max_memory and stats() are dropped. Use "
                    "`stoker.accelerate.prepare(accelerator, model, optimizer, loader, ...)` in place of "
                    "`accelerator.prepare(...)` to keep them (docs/integrations.md).", UserWarning,
                    stacklevel=user_stacklevel())
        return self._pin_memory_device

    @pin_memory_device.setter
    def pin_memory_device(self, value: str):
        self._pin_memory_device = value

    def set_epoch(self, epoch: int):
        """Starts epoch `epoch` everywhere: calls set_epoch(epoch) on the
        sampler and batch sampler that have one (DistributedSampler does), and
        on the dataset in every worker (persistent ones included) before the
        worker produces anything more, or in this process without workers."""
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError(f"epoch should be a non-negative int, but got {epoch!r}")
        self._epoch = epoch
        seen = set()
        for s in (self.sampler, self.batch_sampler, getattr(self.batch_sampler, "sampler", None)):
            fn = getattr(s, "set_epoch", None)
            if fn is not None and id(s) not in seen:
                seen.add(id(s))
                fn(epoch)
        if self.num_workers == 0:
            fn = getattr(self.dataset, "set_epoch", None)
            if fn is not None:
                fn(epoch)
        it = self._iterator if self._iterator is not None else getattr(self, "_last_iter", lambda: None)()
        if it is not None:
            it._engine.set_epoch(epoch)
            it._loader_epoch = epoch
        final = self.__dict__.get("_stoker_final", {})
        if final.get("state") is not None and final["state"].get("epoch") != epoch:
            final.pop("state")  # another epoch: the one left mid-way is not resumed

    # ---- resume -------------------------------------------------------------

    _STATE_VERSION = STATE_VERSION

    def state_dict(self) -> dict:
        """Where this loader is: small (no data), enough for a new loader (even
        one built with another seed, or another num_workers) to yield exactly
        the batches this one would yield next.  Save it with the model."""
        it = self._iterator if self._iterator is not None else getattr(self, "_last_iter", lambda: None)()
        if it is not None and not it._shutdown_for_good():
            return it.resume_state()
        final = self.__dict__.get("_stoker_final", {}).get("state")
        if final is not None:
            return final  # the last iterator, let go of mid-epoch: where it stopped
        # Before (or between) epochs: nothing delivered; the order is the one
        # the random state now would give.
        return {"version": self._STATE_VERSION, "epoch": getattr(self, "_epoch", None),
                "delivered": 0, "delivered_extra": [], "rng": rng_snapshot(self), "base_seed": None,
                "num_workers": self.num_workers, "iterable": isinstance(self.dataset, IterableDataset),
                "rank": self.rank, "world_size": self.world_size}

    def load_state_dict(self, state: dict):
        """Makes the next iteration resume where `state` (from state_dict(),
        maybe of another process) stopped."""
        if not isinstance(state, dict) or state.get("version") != self._STATE_VERSION:
            raise ValueError(f"not a stoker.DataLoader state (version {self._STATE_VERSION}): "
                             f"{type(state).__name__} with keys {sorted(state)[:8] if isinstance(state, dict) else ''}")
        if state["iterable"] != isinstance(self.dataset, IterableDataset):
            kinds = ("an IterableDataset", "a map-style dataset")
            saved, ours = (kinds if state["iterable"] else kinds[::-1])
            raise ValueError(f"the state was saved for {saved}, and this loader's dataset is {ours}")
        if state["iterable"] and state["delivered"]:
            if state["num_workers"] != self.num_workers:
                raise ValueError(
                    f"the state was saved with num_workers={state['num_workers']}, and this loader has "
                    f"num_workers={self.num_workers}: an IterableDataset's stream is split between workers, so "
                    "it resumes mid-epoch only with the same num_workers")
            if self._iterator is not None:  # its workers have moved on: start afresh
                self._iterator._shutdown_workers()
                self._iterator = None
        elif state.get("worker_rng") is not None and self._iterator is not None:
            # Persistent workers hold their own random state: new ones start
            # from the saved states.
            self._iterator._shutdown_workers()
            self._iterator = None
        moved = (state["rank"], state["world_size"], state.get("batch_size", self.batch_size)) != \
            (self.rank, self.world_size, self.batch_size)
        if moved and (state["delivered"] or state["delivered_extra"]) and state.get("order") is None:
            why = ("an IterableDataset's stream is split between ranks and workers by the dataset itself"
                   if state["iterable"] else
                   "its epoch's order is its sampler's own (stoker resumes on another topology for "
                   f"{_topology.KNOWN})")
            raise ValueError(f"the state was saved by rank {state['rank']} of {state['world_size']} with batch_size="
                             f"{state.get('batch_size', self.batch_size)}, and this loader is rank {self.rank} of "
                             f"{self.world_size} with batch_size={self.batch_size}: it cannot resume mid-epoch on "
                             f"another topology, because {why}. Load it with the saved topology, or from a state "
                             "taken between epochs")
        saved = (state.get("order") or {}).get("recipe") or {}
        if saved.get("kind") == "mix" and hasattr(self.sampler, "mix"):
            from stoker import _mix_state
            ours = self.sampler._stoker_recipe()
            if not _mix_state.same_mix(saved, ours):
                _mix_state.changed(saved, ours, self.sampler.mix)  # (refused now, not at iter(), if it cannot be)
        if state["epoch"] is not None:
            self.set_epoch(state["epoch"])
        self._resume = state
        self.__dict__.get("_stoker_final", {}).pop("state", None)

    def __iter__(self):
        """torch's: a new iterator per pass, or with persistent workers the
        one iterator, reset.  A thread that asks while another thread is in
        the middle of a pass over the persistent workers gets an iterator of
        its own (workers started for this pass) instead of resetting the one
        the other thread reads: both get whole epochs."""
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        with self.__dict__.setdefault("_stoker_iter_lock", threading.Lock()):
            it = self._iterator
            if it is None:
                self._iterator = self._get_iterator()
                return self._iterator
            busy = it._busy_in_another_thread()
            if busy is None:
                it._reset(self)
                return it
        if not getattr(self, "_stoker_busy_warned", False):
            self._stoker_busy_warned = True
            warnings.warn(f"stoker: thread {threading.current_thread().name!r} iterates this DataLoader while "
                          f"thread {busy!r} is in the middle of a pass over its persistent workers: this pass "
                          "gets workers of its own (started now, gone when it ends), so that neither thread "
                          "loses samples. Give each thread a DataLoader of its own to keep persistent workers "
                          "for both.", UserWarning, stacklevel=user_stacklevel())
        return self._get_iterator(own_pass=True)

    def check_worker_number_rationality(self):
        if "num_workers" not in getattr(self, "_stoker_auto", ()):  # (the autotuner keeps within the cores)
            super().check_worker_number_rationality()

    def _get_iterator(self, own_pass: bool = False):
        if self.num_workers > 0:
            self.check_worker_number_rationality()
        return _StokerIter(self, own_pass=own_pass)

    def _with_dataset_part(self, st: dict) -> dict:
        """stats() with max_memory as given, and the dataset's part of it."""
        held = self.max_memory - st.get("max_memory", self.max_memory)
        if held > 0:
            st["max_memory"], st["dataset_memory_bytes"] = self.max_memory, held
        return st

    def _pool_memory(self, native: bool) -> int:
        """max_memory less what the dataset holds of it (a ParquetDataset's
        decoded row groups: once when C++ threads read it here, once per
        worker process otherwise); the slot pool's budget."""
        held = int(getattr(self.dataset, "memory_bytes", 0)) if getattr(type(self.dataset), "_holds_loader_memory",
                                                                            False) else 0
        held *= 1 if native else max(1, self.num_workers)
        pool = self.max_memory - held
        if held and pool < (16 << 20):
            raise ValueError(f"max_memory={self.max_memory} bytes holds the dataset's decoded data ({held} bytes: "
                             f"{type(self.dataset).__name__}.memory_bytes"
                             f"{'' if native else f' in each of {self.num_workers} worker processes'}) and leaves "
                             f"{max(pool, 0)} bytes for batches, less than 16 MiB: raise max_memory, or give the "
                             "dataset a smaller cache_bytes or shuffle_window")
        return pool

    def stats(self, memory: bool = True) -> dict:
        """Statistics of the live iterator, or of the last one as it ended
        (its epoch over, or dropped); {} before the first.

        Memory: max_memory, budget_bytes, arena_bytes (what the pool holds),
        slots / slot_bytes by state (free, queued, filling, ready, held: held
        is the training loop's), main / workers with RSS, PSS and USS (with
        memory=True; /proc reads, 0.1 ms for a small process, 5-12 ms per GiB
        it maps in small pages) and tree_pss.
        Work: workers' batches, busy_s, busy_fraction and stage_s (seconds in
        each stage: read, fetch, decode, transform, collate, publish and the
        waits); bottleneck: the stage that holds the loop back this epoch
        (getitem, store, decode, transform, collate, memory_budget or
        training_loop), wait_by_stage (the loop's wait split by stage, summing
        to 1) and advice (docs/trace.md); dataset_memory_bytes (the part of
        max_memory a dataset's own cache holds: ParquetDataset's decoded row
        groups, left out of budget_bytes); queues (in_progress,
        reorder_buffer, spilled, retry, per_worker ring depth); throughput
        (batches, batches_per_s, bytes_per_s, stall_s and stall_fraction: the
        time the training loop waited in next()); autotune, with "auto"
        knobs: where they are and every decision (docs/autotune.md).  Once the iterator has
        ended its workers are gone: their memory reads 0, and with
        memory=True main is read as this call runs and tree_pss is main's.
        docs/memory.md has more."""
        it = self._iterator if self._iterator is not None else getattr(self, "_last_iter", lambda: None)()
        if it is not None and not it._shutdown:
            return self._with_dataset_part(it.stats(memory))
        st = dict(getattr(self, "_final_stats", {}))
        if st and memory:
            try:
                st["main"] = dict(N.lib.process_memory(os.getpid()))
            except Exception:  # noqa: BLE001 - as a live iterator's: no /proc, no memory figures
                pass
            else:
                st["tree_pss"] = st["main"]["pss"]
        return self._with_dataset_part(st)
