"""A streaming dataset: a local cache over a remote store (docs/streaming.md).
stoker.cache is this module under its former name.

    ds = stoker.streaming.StreamingDataset("http://host:8080/shards", "/local/cache",
                                           max_bytes=200 << 30,
                                           features={"x": ("float32", (1000,)), "y": ("int64", ())})
    loader = stoker.DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader: ...
        print(ds.stats())   # cached bytes and shards, hit rate, fetch throughput, ...

The shards (TFRecord, or WebDataset-style tar with fields=) live on a store:
a directory (a path or file://) or HTTP(S) (libcurl: range requests, one
kept-alive connection per fetcher, retries with exponential backoff, then an
OSError naming the URL).  An index file there lists them ("name size crc32c
samples" per line; `stoker index DIR` writes it), or pass shards=[(name,
size, crc32c, samples), ...].  Background fetcher threads download shards
into `local` (to a .part file, checked against the index's size and CRC-32C,
stamped with its CRC and renamed; durable=True fsyncs each instead) under
`max_bytes`.  mode="full" (the default): each epoch reads the whole remote
dataset, every sample once, fetching `prefetch` shards ahead of the readers
(kept in the cache while it has room, the rest streamed through reused memory
buffers, as far ahead as they go).  mode="cached": each epoch reads only the
shards cached when it begins (a cold cache's first epoch: part of the
dataset), while the cache keeps filling and, once full, turns over
(eviction="oldest" or "lru"; a shard being read is never evicted).  Several loaders (the ranks of a
node) may share `local`.  Read by stoker.DataLoader's C++ threads.

Below it: Store (one store), ShardCache (whole shards in a directory under a
budget), parse_shard_index / write_index.
"""
from __future__ import annotations

import math
import operator
import os
import warnings
from typing import Any, Iterable, Iterator, Mapping

from stoker import _native as N
from stoker._sampling import EpochPasses
from stoker._store import Store, _storage_options
from stoker.errors import user_stacklevel
from stoker.io import NativeDataset, _feature_specs, _tar_decls

try:
    from torch.utils.data import Sampler as _SamplerBase
except ImportError:  # pragma: no cover - numpy-only use
    _SamplerBase = object

# ShardCache(dir, max_bytes): whole shards from a Store in a local directory
# under a byte budget, shared safely by threads and processes; fetch(store,
# name, size, crc32c=None) -> a pin (path; not evicted until release()).
ShardCache = N.lib.ShardCache
# parse_shard_index(text, where) -> [(name, size, crc32c or None, samples or
# None)] from an index file's lines "name size [crc32c [samples]]".
parse_shard_index = N.lib.parse_shard_index

__all__ = ["Store", "ShardCache", "StreamingDataset", "StreamingSampler", "parse_shard_index", "write_index"]


def _cpu_list(name: str, cpus) -> list[int]:
    """`cpus` (None or CPU numbers) as a list for the native layer; a bad
    value is a ValueError naming `name` (whether the process may use each CPU
    is checked there, against its affinity)."""
    if cpus is None:
        return []
    if isinstance(cpus, (str, bytes)) or not isinstance(cpus, Iterable):
        raise ValueError(f"StreamingDataset: {name} should be CPU numbers (e.g. [2, 3] or range(4, 8)), got {cpus!r}")
    out = []
    for c in cpus:
        try:
            n = -1 if isinstance(c, bool) else operator.index(c)  # (numpy integers too)
        except TypeError:
            n = -1
        if n < 0:
            raise ValueError(f"StreamingDataset: {name} should be CPU numbers >= 0, got {c!r} in {cpus!r}")
        out.append(n)
    if not out:
        raise ValueError(f"StreamingDataset: {name} is empty: name at least one CPU, or leave it None")
    return out


def write_index(directory: str | os.PathLike, name: str = "index.txt", format: str | None = None) -> str:
    """Writes the index of the shards in `directory` (every .tfrecord/.tfrecords/
    .tfr/.tar file, or those of `format`): "name size crc32c samples" per
    line, atomically.  Returns its path."""
    directory = os.fspath(directory)
    rows = []
    for f in sorted(os.listdir(directory)):
        kind = N.lib.shard_format_of(f)  # (the C++ list of extensions)
        if kind is None or (format is not None and kind != format) or f.startswith("."):
            continue
        rows.append(N.lib.describe_shard(os.path.join(directory, f), kind))
    if not rows:
        raise FileNotFoundError(f"write_index: no .tfrecord or .tar shards in {directory}")
    path = os.path.join(directory, name)
    N.lib.write_file_atomically(path, N.lib.format_shard_index(rows).encode())
    return path


def _streaming_options(remote, local, max_bytes, mode, *, features, fields, shards, index, eviction, fetchers,
                       fetcher_cpus, prefetch, stream_buffers, shuffle_window, min_shards, fetch_seed, wait_timeout,
                       on_error, attempts, backoff_s, max_backoff_s, connect_timeout_s, stall_timeout_s,
                       storage_options, durable):
    """StreamingDataset's arguments as the native StreamingOptions, checked:
    the one place they are turned into options (the opening process's
    dataset and a worker's reader both come from it)."""
    # The options' rules are C++'s (StreamingOptions' setters and
    # StreamingDataset::Open); here only what C++ cannot see: which argument
    # was given, and an int's sign before it becomes an unsigned one.
    if features is not None and fields is not None:
        raise ValueError("StreamingDataset: features= is for TFRecord shards, fields= for tar shards: give one")
    for name, v in (("max_bytes", max_bytes), ("fetchers", fetchers or 0), ("prefetch", prefetch),
                    ("stream_buffers", stream_buffers), ("shuffle_window", shuffle_window), ("min_shards", min_shards)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"StreamingDataset: {name} should be an int >= 0, got {v!r}")
    o = N.lib.StreamingOptions()
    o.remote, o.local, o.max_bytes, o.mode, o.eviction = remote, local, int(max_bytes), mode, eviction
    if shards is not None:
        o.shards = shards
    o.index, o.on_error = index, on_error
    o.format = "tfrecord" if features is not None else "tar"
    o.features = _feature_specs(features, "StreamingDataset") if features is not None else []
    o.tar_fields = _tar_decls(fields, "StreamingDataset")
    o.fetchers, o.fetcher_cpus, o.prefetch, o.stream_buffers = fetchers or 0, _cpu_list("fetcher_cpus", fetcher_cpus), \
        prefetch, stream_buffers
    o.shuffle_window, o.min_shards, o.fetch_seed = shuffle_window, min_shards, int(fetch_seed)
    o.wait_timeout_s = float(wait_timeout or 0)
    o.attempts, o.backoff_s, o.max_backoff_s = int(attempts), float(backoff_s), float(max_backoff_s)
    o.connect_timeout_s, o.stall_timeout_s = float(connect_timeout_s), float(stall_timeout_s)
    o.storage_options = _storage_options(storage_options, "StreamingDataset")
    o.durable = bool(durable)
    return o


class StreamingDataset(NativeDataset):
    """StreamingDataset(remote, local, max_bytes, mode="full", *,
    features=None, fields=None, shards=None, index="index.txt",
    eviction="oldest", fetchers=None, fetcher_cpus=None, prefetch=4,
    stream_buffers=0, shuffle_window=4, min_shards=1,
    fetch_seed=0, wait_timeout=None, on_error="raise", attempts=5,
    backoff_s=0.1, max_backoff_s=5.0, connect_timeout_s=10.0,
    stall_timeout_s=30.0, storage_options=None, durable=False, transform=None)

    remote: the store (a directory, file://..., http(s)://..., or
    s3://bucket/prefix: S3 or an S3-compatible server; storage_options=
    {endpoint_url, region_name, profile_name, aws_access_key_id,
    aws_secret_access_key, aws_session_token} as boto3 names them, each one
    left out found as the AWS SDKs find it; without an index file under the
    prefix the shards are the objects of the dataset's format there).  local: the
    cache directory, the cache's own (every file in it counts and may be
    evicted: a directory holding anything but the dataset's shards that is
    not a cache yet is refused).  max_bytes: its budget (complete and
    downloading shards; 0 in mode "full": nothing is written there, every
    shard streams through memory); the disk's free space is a budget too
    (the cache leaves min(1 GiB, 5% of the file system) free).  durable:
    fsync each downloaded shard; by default shards are not fsynced (a cache
    can be fetched again) but stamped with their CRC-32C and boot, checked
    on first use after a reboot, and a shard a power cut tore is fetched
    again (stats(): verified_shards, torn_shards).  features= (TFRecord shards: name -> (dtype, shape)) or
    fields= (tar shards, as stoker.io.TarShardDataset; None infers them from
    the first shard, which the constructor then waits for, as it does for an
    "npy" field; fields declared otherwise are known without a download).
    mode: "full" (the default; each epoch: every shard, every sample exactly
    once, what is not cached streamed; len() is the whole dataset's, from the
    index, which needs its samples column;
    shards kept in the cache while it has room, the rest read through
    stream_buffers reused memory buffers, default 2 * shuffle_window + fetchers
    within a quarter of the memory this process may use, each the size of the
    largest shard; MemoryError when a shuffle window of them would take more
    than half) or "cached" (each epoch: only the shards cached when it
    begins, at least min_shards, waiting for them; wait_timeout= seconds gives
    up; len() is that epoch's; an epoch that leaves shards out warns once and
    stats() counts them: epoch_shards_left_out, shards_left_out).  ("growing",
    this mode's name before, is taken with a DeprecationWarning.)
    fetchers: download threads, each with its own connection (None: from
    the store's preference, 2, or 8 on AWS S3, one more at a time while the
    readers wait for shards and each adds a tenth to the download rate, up to
    4x that; stats() says how many run); fetcher_cpus
    (CPU numbers, each one this process may run on) confines them to those
    CPUs, e.g. to keep them off the cores the training step uses (None: for a
    store whose server runs on this machine, the last quarter of this
    process's CPUs, leaving the server the rest; else anywhere; stats()'s
    fetcher_placement says which; docs/streaming.md).
    An epoch's samples come shard by shard: shards shuffled, and the samples of
    shuffle_window shards at a time shuffled together (stoker.DataLoader uses
    this order; its seed= and set_epoch() drive it).  The constructor returns
    once the first epoch's shards are there."""

    def __init__(self, remote: str | os.PathLike, local: str | os.PathLike, max_bytes: int, mode: str = "full", *,
                 features: Mapping[str, tuple] | None = None, fields: Mapping[str, Any] | None = None,
                 shards=None, index: str = "index.txt", eviction: str = "oldest", fetchers: int | None = None,
                 fetcher_cpus: Iterable[int] | None = None, prefetch: int = 4, stream_buffers: int = 0,
                 shuffle_window: int = 4, min_shards: int = 1, fetch_seed: int = 0,
                 wait_timeout: float | None = None, on_error: str = "raise", attempts: int = 5,
                 backoff_s: float = 0.1, max_backoff_s: float = 5.0, connect_timeout_s: float = 10.0,
                 stall_timeout_s: float = 30.0, storage_options: Mapping[str, str] | None = None,
                 durable: bool = False, transform=None):
        if mode == "growing":
            warnings.warn("StreamingDataset: mode='growing' is now called mode='cached' (each epoch reads the shards "
                          "cached when it begins); the default, mode='full', reads the whole dataset every epoch",
                          DeprecationWarning, stacklevel=2)
            mode = "cached"
        if transform is not None and not callable(transform):
            raise TypeError(f"StreamingDataset: transform should be callable, got {type(transform).__name__}")
        # The options as given: what a worker process opens its reader from
        # (pickled for a spawned one), through the one builder below.
        self._kwargs = dict(
            remote=os.fspath(remote), local=os.fspath(local), max_bytes=max_bytes, mode=mode, features=features,
            fields=fields, shards=None if shards is None else [tuple(s) for s in shards], index=index,
            eviction=eviction, fetchers=fetchers, fetcher_cpus=fetcher_cpus, prefetch=prefetch,
            stream_buffers=stream_buffers, shuffle_window=shuffle_window, min_shards=min_shards,
            fetch_seed=fetch_seed, wait_timeout=wait_timeout, on_error=on_error, attempts=attempts,
            backoff_s=backoff_s, max_backoff_s=max_backoff_s, connect_timeout_s=connect_timeout_s,
            stall_timeout_s=stall_timeout_s, storage_options=storage_options, durable=durable)
        if fetcher_cpus is not None:
            self._kwargs["fetcher_cpus"] = _cpu_list("fetcher_cpus", fetcher_cpus)
        self._native = N.lib.StreamingDataset.open(_streaming_options(**self._kwargs))
        self._transform = transform
        self._pid = os.getpid()
        self._view = None
        self._shards = None

    # ---- reading, here or in a worker process ----------------------------

    def _owner(self) -> bool:
        """This is the process that opened it (its fetcher threads run here)."""
        return self._native is not None and os.getpid() == self._pid

    def _reader_shards(self) -> list:
        """The shards a worker's reader reads: the opened dataset's (an
        immutable list, readable in a forked child too), or the ones an
        unpickled copy came with."""
        if self._shards is None and self._native is not None and self._kwargs["mode"] == "full":
            return list(self._native.remote_shards)
        return self._shards or []

    def _open_reader(self):
        """The C++ reader of this dataset for a process that did not open it
        (StreamingDataset::OpenReader): it refuses mode='cached' and
        max_bytes=0, saying what to do instead."""
        o = _streaming_options(**self._kwargs)
        o.shards = self._reader_shards()
        return N.lib.StreamingDataset.open_reader(o)

    def _reader(self):
        if self._view is None or self._view_pid != os.getpid():
            view = NativeDataset.__new__(NativeDataset)
            view._native = self._open_reader()
            self._view, self._view_pid = view, os.getpid()
        return self._view

    def __len__(self) -> int:
        return len(self._native) if self._owner() else len(self._reader())

    def __getitem__(self, index: int):
        item = super().__getitem__(index) if self._owner() else self._reader()[index]
        return item if self._transform is None else self._transform(item)

    def set_epoch(self, epoch: int) -> None:
        if self._owner():
            super().set_epoch(epoch)
        # (a worker's reader: every epoch of a full dataset has the same samples)

    def _only_here(self, what: str):
        if not self._owner():
            raise RuntimeError(f"StreamingDataset.{what}: in a worker process a StreamingDataset only reads "
                               "(ds[i], len(ds)); call it in the process that opened it")

    def __repr__(self):
        if not self._owner():
            return f"stoker.streaming.StreamingDataset({self._kwargs['remote']!r}, a worker's reader)"
        return f"stoker.streaming.StreamingDataset({self._native.describe()}, {len(self)} samples this epoch)"

    def __reduce__(self):
        # Pickled for a spawned worker process: it reads through a reader of
        # its own, opened from the same options.
        if self._kwargs["mode"] != "full" or self._kwargs["max_bytes"] == 0:
            self._open_reader()  # raises what to do instead
        return (_rebuild_reader, (self._kwargs, self._reader_shards(), self._transform))

    @property
    def mode(self) -> str:
        return self._native.mode

    @property
    def epoch_shards(self) -> list[str]:
        """The current epoch's shards (index order)."""
        return list(self._native.epoch_shards)

    @property
    def remote_shards(self) -> list[tuple]:
        """(name, size, crc32c, samples) of every shard on the store."""
        return list(self._native.remote_shards)

    def begin_epoch(self, epoch: int, shards: list[str] | None = None) -> None:
        """Starts epoch `epoch` (the sampler does this): a new snapshot of the
        cached shards, or exactly `shards` (downloaded if need be)."""
        self._only_here("begin_epoch")
        if shards is not None:
            self._native.use_shards(list(shards))
        self._native.begin_epoch(int(epoch))

    def _warn_left_out(self) -> None:
        """mode="cached": the first epoch that leaves shards out says so, once
        (stats() counts them every epoch)."""
        if getattr(self, "_left_out_warned", False):
            return
        native = self._native
        remote = native.remote_shards
        have = len(native.epoch_shards)
        if have >= len(remote):
            return
        self._left_out_warned = True
        counts = [s[3] for s in remote]
        samples = "" if None in counts else f" ({len(self._native)} of {sum(counts)} samples)"
        warnings.warn(f"stoker: StreamingDataset {self._kwargs['remote']!r} in mode='cached' reads {have} of its "
                      f"{len(remote)} shards this epoch{samples}: the shards cached when the epoch began. "
                      "mode='full' (the default) reads every shard each epoch, streaming what is not cached; "
                      "stats()['shards_left_out'] counts what cached epochs left out.", UserWarning,
                      stacklevel=user_stacklevel())

    def stats(self) -> dict:
        """Cached bytes and shards, hit rate, fetch throughput, bytes in flight,
        evictions, the fraction of the remote dataset seen, fetch errors."""
        self._only_here("stats")
        return self._native.stats()

    def set_fetchers(self, n: int) -> None:
        """From now on `n` fetchers run, as the caller chooses (an autotuned
        DataLoader does: docs/autotune.md), no longer as the dataset's own
        scaling does; from 1 to stats()["fetchers_most"].  A dataset opened
        with fetchers=N refuses (ValueError)."""
        self._only_here("set_fetchers")
        self._native.set_fetchers(n)

    def close(self) -> None:
        """Stops the fetcher threads (cached shards stay readable)."""
        self._only_here("close")
        self._native.close()

    def sampler(self, shuffle: bool = False, seed: int = 0, rank: int = 0, world_size: int = 1,
                pad: bool = True) -> "StreamingSampler":
        return StreamingSampler(self, shuffle, seed, rank, world_size, pad)


def _rebuild_reader(kwargs, shards, transform):
    """A StreamingDataset unpickled in a spawned worker: reads through a reader."""
    ds = StreamingDataset.__new__(StreamingDataset)
    ds._native, ds._pid, ds._view = None, None, None
    ds._kwargs, ds._shards, ds._transform = kwargs, shards, transform
    return ds


def streaming_source(dataset):
    """The StreamingDataset under `dataset` (through native transforms and
    MappedDataset), or None."""
    from stoker.io import source_of
    return source_of(dataset, StreamingDataset)


class StreamingSampler(EpochPasses, _SamplerBase):
    """The order of a StreamingDataset's epochs (stoker.DataLoader makes one):
    each pass begins an epoch of the dataset (its snapshot), then yields this
    rank's part of the shard-by-shard order drawn from (seed, epoch).  The
    epoch is set_epoch()'s, or one more than the last pass's.  With several
    ranks under torch.distributed, an epoch of mode="cached" is rank 0's
    snapshot (broadcast), so every rank reads the same samples."""

    def __init__(self, dataset: StreamingDataset, shuffle: bool = False, seed: int = 0, rank: int = 0,
                 world_size: int = 1, pad: bool = True):
        self.dataset = dataset
        self.shuffle, self.seed, self.rank, self.world_size, self.pad = bool(shuffle), int(seed), rank, world_size, pad
        self._replay = None
        self._current = None
        self._topology = None  # a resumed epoch's order state (stoker._topology), for the next epoch begun
        self._stoker_resumed = ([], True, None)  # (segments, same topology, length split) of the epoch begun

    def __len__(self) -> int:
        return N.lib.samples_per_rank(len(self.dataset), self.world_size, self.pad)

    def _stoker_state(self):
        """What a resumed run needs to repeat the current epoch."""
        return self._current

    def _stoker_load_state(self, state) -> None:
        self._replay = state

    def _stoker_load_topology(self, saved: dict, delivered: int, extra, batch_size) -> None:
        """The next epoch begun is the rest of a saved one on this topology
        (stoker._topology): `saved` is the state's "order"."""
        self._topology = (saved, int(delivered), list(extra), batch_size)

    def _stoker_recipe(self):
        """The global order of the epoch begun (stoker._topology)."""
        cur = self._current or {}
        return dict(kind="stream", n=len(self.dataset), epoch=cur.get("epoch", self.epoch), shuffle=self.shuffle,
                    seed=self.seed & 0xFFFF_FFFF_FFFF_FFFF, world=self.world_size, rank=self.rank, pad=self.pad,
                    split="contiguous")

    def __iter__(self) -> Iterator[int]:
        # (Only a loader without workers iterates in Python: stoker.DataLoader's
        # workers take the native order from _stoker_native_order as it is.)
        from stoker._sampling import iterate
        yield from iterate(self._stoker_native_order())

    def _stoker_native_order(self):
        """Begins the next epoch; this rank's order of it (an EpochOrder)."""
        epoch = self._begin_epoch()
        ds = self.dataset
        native = ds._native
        replay, self._replay = self._replay, None
        if replay is not None:
            epoch = replay["epoch"]
            if replay.get("shards") is not None:
                native.use_shards(list(replay["shards"]))
            native.begin_epoch(epoch)
        elif ds.mode == "cached" and self.world_size > 1:
            self._begin_agreed(native, epoch)
        else:
            native.begin_epoch(epoch)
        self._current = {"epoch": epoch, "shards": list(native.epoch_shards) if ds.mode == "cached" else None}
        if ds.mode == "cached" and self.rank == 0:
            ds._warn_left_out()
        topology, self._topology = self._topology, None
        self._stoker_resumed = ([], True, None)
        if topology is not None and topology[0]["recipe"].get("kind") == "stream":
            # The rest of a saved epoch, on this topology: the shards are
            # fetched in the order this rank now reads them.
            from stoker import _topology
            saved, delivered, extra, batch_size = topology
            part, segments, same, length, _ = _topology.resumed_order(saved, delivered, extra, self.world_size,
                                                                   self.rank, self.pad, batch_size, None, native)
            self._stoker_resumed = (segments, same, length)
            if segments or not same:
                return native.order_as(part)
        return native.order(epoch, self.shuffle, self.seed, self.rank, self.world_size, self.pad)

    def _begin_agreed(self, native, epoch):
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("a StreamingDataset of mode='cached' read by several ranks needs torch.distributed "
                               "initialized: rank 0's snapshot of the cache is broadcast so that every rank reads the same "
                               "samples (or use mode='full')")
        box = [None]
        if self.rank == 0:
            native.begin_epoch(epoch)
            box[0] = list(native.epoch_shards)
        dist.broadcast_object_list(box, src=0)
        if self.rank != 0:
            native.use_shards(box[0])
            native.begin_epoch(epoch)
