"""Directory work per download in a large cache of mode="cached" at turnover.

    python bench/cache_turnover.py --cached 8000 --seconds 5

A local-directory store of --cached + 300 tiny TFRecord shards (2 records of
1 KiB), a cache holding --cached of them with max_bytes exactly that; a
StreamingDataset of mode="cached" (2 fetchers) reads its first epoch (every cached
shard in use until read), and then for --seconds every download must evict
one: the time per download is what scanning, locking and evicting in a
directory of that many files costs (the bytes are next to nothing).
With --fits, the cache has room for every remote shard and holds all
--cached + 300 of them: the fetchers have nothing to fetch, and the time of a
later epoch over them (two, after a first that writes the record indexes) is
what the fetchers' looking for work costs the readers.  --remote sets how
many shards the store holds (default --cached + 300): with many more remote
shards than cached ones, what looking for the cached ones costs (`stats()`,
timed at the end, median of 20 calls).  Prints one line and
a JSON line.  With --package DIR, imports stoker from DIR (an
installed copy of another commit, to compare).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cached", type=int, default=8000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--dir", default="/var/tmp/stoker-cache-turnover")
    ap.add_argument("--package", default=None)
    ap.add_argument("--fits", action="store_true", help="every shard cached, room for all: time later epochs")
    ap.add_argument("--remote", type=int, default=0, help="shards on the store (default: --cached + 300)")
    args = ap.parse_args()
    if args.package:
        sys.path.insert(0, args.package)
    import numpy as np
    import stoker
    from stoker.cache import StreamingDataset, write_index
    from stoker.io import write_tfrecord

    total = args.remote or args.cached + 300
    if total <= args.cached:
        raise SystemExit(f"--remote {total} must be more than --cached {args.cached}")
    root = os.path.join(args.dir, f"{args.cached}-{total}")
    remote, local = os.path.join(root, "remote"), os.path.join(root, "cache")
    if not os.path.exists(os.path.join(remote, "index.txt")):
        os.makedirs(remote, exist_ok=True)
        first = os.path.join(remote, "shard-000000.tfrecord")
        write_tfrecord(first, [{"x": np.full(256, i, np.float32), "y": np.int64(i)} for i in range(2)])
        for k in range(1, total):
            shutil.copyfile(first, os.path.join(remote, f"shard-{k:06d}.tfrecord"))
        write_index(remote)
    size = os.path.getsize(os.path.join(remote, "shard-000000.tfrecord"))
    shutil.rmtree(local, ignore_errors=True)
    os.makedirs(local)
    held = total if args.fits else args.cached
    for k in range(held):
        shutil.copyfile(os.path.join(remote, f"shard-{k:06d}.tfrecord"), os.path.join(local, f"shard-{k:06d}.tfrecord"))
    ds = StreamingDataset(remote, local, max_bytes=(2 if args.fits else 1) * held * size, mode="cached", fetchers=2,
                          features={"x": ("float32", (256,)), "y": ("int64", ())})
    loader = stoker.DataLoader(ds, batch_size=1000, num_workers=2)
    for _ in loader:
        pass
    if args.fits:
        times = []
        for e in (1, 2):
            loader.set_epoch(e)
            t0 = time.perf_counter()
            samples = sum(len(b["y"]) for b in loader)
            times.append(time.perf_counter() - t0)
            assert samples == 2 * total, samples
        downloads = ds.stats()["downloads"]
        ds.close()
        print(f"{total} shards, all cached: later epochs {times[0]:.2f} s and {times[1]:.2f} s "
              f"({downloads} downloads)")
        print(json.dumps({"shards": total, "epoch_seconds": times, "downloads": downloads}))
        return
    d0, t0 = ds.stats()["downloads"], time.perf_counter()
    time.sleep(args.seconds)
    st, dt = ds.stats(), time.perf_counter() - t0
    stats_ms = []
    for _ in range(20):
        t1 = time.perf_counter()
        ds.stats()
        stats_ms.append((time.perf_counter() - t1) * 1e3)
    stats_ms = sorted(stats_ms)[10]
    ds.close()
    n = st["downloads"] - d0
    print(f"{args.cached} cached shards of {total}: {n} downloads in {dt:.1f} s = {dt / max(1, n) * 1e3:.1f} ms each "
          f"(2 fetchers), {st['evictions']} evictions in all; stats() {stats_ms:.1f} ms")
    print(json.dumps({"cached": args.cached, "remote": total, "downloads": n, "seconds": dt,
                      "ms_per_download": dt / max(1, n) * 1e3, "stats_ms": stats_ms}))


if __name__ == "__main__":
    main()
