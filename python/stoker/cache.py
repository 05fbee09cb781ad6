"""Remote stores and a local shard cache (issue 7; the StreamingDataset on
top of them is not built yet).

    store = stoker.cache.Store("http://host:8080/shards")   # or a path, file://...
    store.size("shard-000.tar"); store.read("shard-000.tar", 0, 512)
    store.download("shard-000.tar", "/local/shard-000.tar.part")

HTTP(S) through libcurl: range requests, one kept-alive connection per
Store, retries with exponential backoff (attempts=, backoff_s=,
max_backoff_s=), timeouts (connect_timeout_s=, stall_timeout_s=: a transfer
below 1 KiB/s for that long fails and is retried); after the last attempt an
OSError naming the URL, the attempts and the last failure.  A download
resumes where a failed attempt stopped (range request).  A Store is for one
thread at a time.
"""
from stoker import _native as N

Store = N.lib.Store
# ShardCache(dir, max_bytes): whole shards from a Store in a local directory
# under a byte budget, shared safely by threads and processes; fetch(store,
# name, size, crc32c=None) -> a pin (path; not evicted until release()).
ShardCache = N.lib.ShardCache
# parse_shard_index(text, where) -> [(name, size, crc32c or None)] from an
# index file's lines "name size [crc32c hex]".
parse_shard_index = N.lib.parse_shard_index

__all__ = ["Store", "ShardCache", "parse_shard_index"]
