"""The streaming cache against curl and against the native read path.

    python bench/streaming.py --shards 32 --shard-mb 32 --rounds 3

TFRecord shards of 1 MiB float32 records (--shards of --shard-mb each) are
served by a real nginx on 127.0.0.1 (the test suite's, tests/python/nginx.py).
Per round, in this order, with the page cache warm for the server's files:
  curl:      `curl` downloading every shard to /dev/null over one kept-alive
             connection, and with --parallel --parallel-max 2 (the best of the
             two is the reference); and, 2 connections, into files on
             /dev/shm (what writing the bytes anywhere costs);
  streaming: one epoch of stoker.cache.StreamingDataset(mode="full") from an
             empty cache of half the dataset's size (so it evicts as it goes),
             stoker.DataLoader(batch_size=8, num_workers=2): downloads (2
             fetchers), CRC-32C checks, fsyncs, record CRCs and decoding;
             rate = the dataset's bytes / the epoch's wall time.  Twice: the
             cache on --dir's disk, and on /dev/shm (no disk: what the
             pipeline itself does; a disk slower than the network caps the
             first, and `dd conv=fsync` of the same size is printed beside it);
             half the shards go into the cache, the other half stream through
             reused memory buffers (no room left: nothing is evicted); and a
             third time with a cache of one shard (all through memory);
  cached:    a second StreamingDataset whose cache holds every shard, one
             epoch, against stoker.io.TFRecordDataset over the same cached
             files with the same loader (same order kind: shuffled).
Prints per round and the medians, and a JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

import stoker
from stoker import io
from stoker.cache import StreamingDataset, write_index

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from nginx import Nginx  # noqa: E402

RECORD = 1 << 18  # float32 elements: 1 MiB
FEATURES = {"x": ("float32", (RECORD,))}


def make_shards(root, shards, shard_mb):
    os.makedirs(root, exist_ok=True)
    if os.path.exists(os.path.join(root, "index.txt")) and \
            len([f for f in os.listdir(root) if f.endswith(".tfrecord")]) == shards:
        return
    for s in range(shards):
        write_tfrecord_shard(os.path.join(root, f"shard-{s:04d}.tfrecord"), s, shard_mb)
    write_index(root)


def write_tfrecord_shard(path, s, shard_mb):
    rng = np.random.default_rng(s)
    io.write_tfrecord(path, ({"x": rng.random(RECORD, dtype=np.float32)} for _ in range(shard_mb)))


def dataset_bytes(root):
    return sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root) if f.endswith(".tfrecord"))


def curl_rate(urls, total, parallel, into=None):
    """curl's rate for every URL, to /dev/null or into files in `into`."""
    cmd = ["curl", "-s", "--no-progress-meter", "--fail"]
    if parallel:
        cmd += ["--parallel", "--parallel-max", "2"]
    if into:
        shutil.rmtree(into, ignore_errors=True)
        os.makedirs(into)
    for u in urls:
        cmd += ["-o", os.path.join(into, os.path.basename(u)) if into else "/dev/null", u]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    dt = time.perf_counter() - t0
    if into:
        shutil.rmtree(into, ignore_errors=True)
    return total / dt


def dd_rate(path, total):
    """How fast this disk takes `total` bytes, fsynced (dd conv=fsync)."""
    mb = max(1, total >> 20)
    t0 = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mb}", "conv=fsync"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    os.remove(path)
    return (mb << 20) / dt


def epoch_rate(ds, total):
    loader = stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
    t0 = time.perf_counter()
    n = 0
    for b in loader:
        n += b["x"].numel() * 4
    dt = time.perf_counter() - t0
    return total / dt, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=32)
    ap.add_argument("--shard-mb", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    args = ap.parse_args()
    www = os.path.join(args.dir, "www")
    make_shards(www, args.shards, args.shard_mb)
    total = dataset_bytes(www)
    names = sorted(f for f in os.listdir(www) if f.endswith(".tfrecord"))
    server = Nginx(os.path.join(args.dir, "nginx"), www).start()
    rows = []
    try:
        urls = [f"{server.url}/{n}" for n in names]
        for f in names:  # the server's files in the page cache
            with open(os.path.join(www, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass
        for r in range(args.rounds):
            c1 = curl_rate(urls, total, False)
            c2 = curl_rate(urls, total, True)
            c3 = curl_rate(urls, total, True, into="/dev/shm/stoker-streaming-curl")
            streamed = {}
            largest = max(os.path.getsize(os.path.join(www, n)) for n in names)
            for where, cold, budget in (("disk", os.path.join(args.dir, "cold"), total // 2),
                                        ("shm", "/dev/shm/stoker-streaming-cold", total // 2),
                                        ("mem", os.path.join(args.dir, "cold"), largest)):
                shutil.rmtree(cold, ignore_errors=True)
                ds = StreamingDataset(server.url, cold, max_bytes=budget, mode="full", features=FEATURES,
                                      shuffle_window=2, prefetch=4)
                s_rate, n = epoch_rate(ds, total)
                streamed[where] = (s_rate, ds.stats())
                ds.close()
                shutil.rmtree(cold, ignore_errors=True)
                assert n == args.shards * args.shard_mb * RECORD * 4
            dd = dd_rate(os.path.join(args.dir, "dd.bin"), total)
            warm = os.path.join(args.dir, "warm")
            if r == 0:
                shutil.rmtree(warm, ignore_errors=True)
            full = StreamingDataset(server.url, warm, max_bytes=2 * total, mode="full", features=FEATURES)
            epoch_rate(full, total)  # fills the cache (the first round) / warms it
            c_rate, _ = epoch_rate(full, total)
            assert full.stats()["downloads"] == (args.shards if r == 0 else 0)
            full.close()
            native = io.TFRecordDataset([os.path.join(warm, n) for n in names], features=FEATURES,
                                        index_dir=os.path.join(args.dir, "index"))
            n_rate, _ = epoch_rate(native, total)
            curl = max(c1, c2)
            row = {"curl_1conn_GBps": c1 / 1e9, "curl_2conn_GBps": c2 / 1e9, "curl_to_shm_files_GBps": c3 / 1e9,
                   "dd_fsync_GBps": dd / 1e9,
                   "cached_GBps": c_rate / 1e9, "native_GBps": n_rate / 1e9, "cached_vs_native": c_rate / n_rate}
            for where, (rate_, st) in streamed.items():
                row[f"streaming_{where}_GBps"] = rate_ / 1e9
                row[f"streaming_{where}_vs_curl"] = rate_ / curl
                row[f"streaming_{where}_vs_curl_to_files"] = rate_ / c3
                row[f"evictions_{where}"] = st["evictions"]
            rows.append(row)
            print(f"round {r}: curl {c1 / 1e9:.2f} GB/s (1 conn) {c2 / 1e9:.2f} (2 conns) to /dev/null, {c3 / 1e9:.2f} "
                  f"into files on /dev/shm; streaming full: cache on "
                  f"/dev/shm {row['streaming_shm_GBps']:.2f} GB/s = {row['streaming_shm_vs_curl']:.2f}x curl, on disk "
                  f"{row['streaming_disk_GBps']:.2f} = {row['streaming_disk_vs_curl']:.2f}x (dd conv=fsync "
                  f"{dd / 1e9:.2f}), a one-shard cache (all through memory) {row['streaming_mem_GBps']:.2f} = "
                  f"{row['streaming_mem_vs_curl']:.2f}x; cached {c_rate / 1e9:.2f} GB/s vs native {n_rate / 1e9:.2f} = "
                  f"{row['cached_vs_native']:.2f}x", flush=True)
    finally:
        server.stop()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"median of {len(rows)}: streaming {med['streaming_shm_vs_curl']:.2f}x curl to /dev/null "
          f"({med['streaming_shm_vs_curl_to_files']:.2f}x curl into files; cache on /dev/shm), "
          f"{med['streaming_disk_vs_curl']:.2f}x (on disk), {med['streaming_mem_vs_curl']:.2f}x (through memory); cached {med['cached_vs_native']:.2f}x native "
          f"({total / 1e9:.2f} GB in {args.shards} shards)")
    print(json.dumps({"rounds": rows, "median": med, "bytes": total}))


if __name__ == "__main__":
    main()
