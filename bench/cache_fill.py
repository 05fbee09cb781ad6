"""A first epoch with the streaming cache on, against curl writing the same
files into a directory on the same disk (issue 29, point 4).

    python bench/cache_fill.py --shards 16 --shard-mb 64 --rounds 5

The shards are bench/streaming.py's (TFRecord, 1 MiB float32 records, made
once under --dir), served by a real nginx on 127.0.0.1 from the page cache.
Per round, alternating which goes first, each after `sync` (so that no run
pays for the writeback of the one before) and with its files removed after
(with --settle, after touching and freeing that much memory: bench/fresh_memory.py's settle()):
  curl:         `curl` writing every shard into a fresh directory under --dir
                over one kept-alive connection (no fsync);
  stoker:       StreamingDataset(mode="full", max_bytes = twice the data: every
                shard is written into the cache) read by stoker.DataLoader(
                batch_size=8, num_workers=2, shuffle=True), defaults otherwise:
                the cache stamps each shard (CRC-32C) instead of fsyncing it;
  stoker durable: the same with durable=True (each shard fsynced before use).
The rate is the data's bytes over the wall time from the dataset's
constructor to the epoch's end.  CPU-s per GB: this process and its children
(curl; stoker's threads), and the whole machine's busy time over the run
(/proc/stat: nginx, the kernel's writeback threads and everything else
included).  Prints per round, the medians, and a JSON line last.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import stoker  # noqa: E402
from stoker.cache import StreamingDataset  # noqa: E402
from nginx import Nginx  # noqa: E402
from fresh_memory import settle  # noqa: E402
from streaming import FEATURES, RECORD, served_shards  # noqa: E402


def machine_busy_s():
    """CPU-seconds the machine has been busy (all CPUs; /proc/stat's first
    line less idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measured(run, total, settle_gib=0):
    """run() timed: GB/s, client CPU-s per GB, machine CPU-s per GB."""
    os.sync()
    settle(settle_gib)
    m0, c0, t0 = machine_busy_s(), own_cpu_s(), time.perf_counter()
    run()
    dt = time.perf_counter() - t0
    m1, c1 = machine_busy_s(), own_cpu_s()
    gb = total / 1e9
    return {"GBps": gb / dt, "client_cpu_per_GB": (c1 - c0) / gb, "machine_cpu_per_GB": (m1 - m0) / gb}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--shard-mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench",
                    help="where the shards are made and both copies are written (one disk)")
    ap.add_argument("--settle", type=float, default=0, metavar="GIB",
                    help="before each run, touch and free this much memory (bench/fresh_memory.py's settle())")
    args = ap.parse_args()
    www = os.path.join(args.dir, "www")
    names, total = served_shards(www, args.shards, args.shard_mb)
    into = os.path.join(args.dir, "fill")
    server = Nginx(os.path.join(args.dir, "nginx"), www).start()
    urls = [f"{server.url}/{n}" for n in names]

    def curl():
        os.makedirs(into)
        cmd = ["curl", "-s", "--fail"]
        for u in urls:
            cmd += ["-o", os.path.join(into, os.path.basename(u)), u]
        subprocess.run(cmd, check=True)

    def stoker_epoch(**kw):
        def run():
            ds = StreamingDataset(server.url, into, max_bytes=2 * total, mode="full", features=FEATURES, **kw)
            n = 0
            for b in stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2):
                n += b["x"].numel() * 4
            assert n == args.shards * args.shard_mb * RECORD * 4, n
            st = ds.stats()
            assert st["downloads"] == len(names), st
            ds.close()
        return run

    kinds = [("curl into files", curl), ("stoker, cache on", stoker_epoch()),
             ("stoker, cache on, durable", stoker_epoch(durable=True))]
    rows = {k: [] for k, _ in kinds}
    try:
        for r in range(args.rounds):
            order = kinds if r % 2 == 0 else kinds[::-1]
            for label, run in order:
                shutil.rmtree(into, ignore_errors=True)
                rows[label].append(measured(run, total, args.settle))
                shutil.rmtree(into, ignore_errors=True)
            print(f"round {r}: " + "; ".join(
                f"{k} {rows[k][-1]['GBps']:.2f} GB/s, {rows[k][-1]['client_cpu_per_GB']:.2f} client / "
                f"{rows[k][-1]['machine_cpu_per_GB']:.2f} machine CPU-s/GB" for k, _ in kinds), flush=True)
    finally:
        server.stop()
        shutil.rmtree(into, ignore_errors=True)
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in rows.items()}
    base = med["curl into files"]
    print(f"medians of {args.rounds} rounds ({total / 1e9:.2f} GB in {len(names)} shards, written under {args.dir}):")
    for k, v in med.items():
        per = [x["GBps"] / c["GBps"] for x, c in zip(rows[k], rows["curl into files"])]
        print(f"  {k:28s} {v['GBps']:.2f} GB/s = {v['GBps'] / base['GBps']:.2f}x curl (per round "
              f"{' '.join(f'{p:.2f}' for p in per)}); CPU-s/GB client {v['client_cpu_per_GB']:.2f} "
              f"({v['client_cpu_per_GB'] / base['client_cpu_per_GB']:.2f}x curl's), machine "
              f"{v['machine_cpu_per_GB']:.2f} ({v['machine_cpu_per_GB'] / base['machine_cpu_per_GB']:.2f}x)")
    print(json.dumps({"rounds": rows, "median": med, "bytes": total}))


if __name__ == "__main__":
    main()
