"""A StreamingDataset read in a process other than the one that opened it:
a worker process of stoker.DataLoader or of torch's DataLoader (forked, or
spawned with the dataset pickled), under a user's Python Dataset that calls
stream[i].  The opening process owns the fetcher threads; a worker has none
(after fork they do not exist, and a process per worker downloading the
whole dataset is not what anyone wants).  Instead a view reads sample i of
the epoch from the shard that holds it, fetched on demand through the
node's shared cache directory: ShardCache's file locks make one process
download a shard while the others wait and then read it, and a shard a
reader holds is never evicted.

The epoch is mode="full"'s: every shard of the index in index order, each
with its sample count from the index, the same in every process.  (A
growing dataset's epoch is the shards cached when it began, known only to
the process that began it: a view refuses it with what to do instead.)"""
from __future__ import annotations

import bisect
import collections
import os
import threading


class StreamView:
    # Shards kept open (and pinned) per process: a batch's samples are
    # spread over the shuffle window's shards.
    KEEP_OPEN = 8

    def __init__(self, spec: dict):
        from stoker._native import lib
        from stoker._store import Store
        ShardCache = lib.ShardCache
        self.spec = spec
        if spec["mode"] != "full":
            raise ValueError(
                "StreamingDataset: an epoch of mode='cached' is the shards cached when it began, known only to "
                "the process that opened it, so it cannot be read in a worker process; open it with mode='full' "
                "(every shard of the index, the same in every process), or read it with stoker.DataLoader's "
                "native threads (no Python transform or collate_fn) or num_workers=0")
        if spec["max_bytes"] == 0:
            raise ValueError(
                "StreamingDataset(max_bytes=0) streams shards through the opening process's memory; worker "
                "processes read shards through the cache directory they share, so give it room (max_bytes > 0)")
        self.shards = spec["shards"]  # (name, size, crc32c or None, samples) in index order
        self.firsts = [0]
        for _name, _size, _crc, count in self.shards:
            self.firsts.append(self.firsts[-1] + count)
        self.store = Store(spec["remote"], storage_options=spec["storage_options"], **spec["store"])
        self.cache = ShardCache(spec["local"], spec["max_bytes"], durable=spec["durable"])
        self.open = collections.OrderedDict()  # shard position -> (pin, dataset)
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def __len__(self) -> int:
        return self.firsts[-1]

    def _shard(self, k: int):
        from stoker.io import TarShardDataset, TFRecordDataset
        got = self.open.get(k)
        if got is not None:
            self.open.move_to_end(k)
            return got[1]
        name, size, crc, _count = self.shards[k]
        pin = self.cache.fetch(self.store, name, size, crc)
        spec = self.spec
        if spec["format"] == "tfrecord":
            ds = TFRecordDataset([pin.path], spec["features"], on_error=spec["on_error"])
        else:
            ds = TarShardDataset([pin.path], spec["fields"], on_error=spec["on_error"])
        self.open[k] = (pin, ds)
        while len(self.open) > self.KEEP_OPEN:
            _, (old_pin, old_ds) = self.open.popitem(last=False)
            del old_ds
            old_pin.release()
        return ds

    def __getitem__(self, index: int):
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} out of range for the streaming dataset {self.spec['remote']} "
                             f"({n} samples an epoch)")
        k = bisect.bisect_right(self.firsts, index) - 1
        with self.lock:  # (a thread-pool user: one shard opening at a time)
            ds = self._shard(k)
        item = ds[index - self.firsts[k]]
        return item
