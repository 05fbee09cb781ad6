"""Fetchers chosen by the dataset against a fixed number, from a server that
limits each connection (issue 29: the fetchers' number chosen automatically).

    python bench/fetcher_scaling.py [--rate 40m] [--shards 32] [--shard-mb 8] [--epochs 6]

nginx on 127.0.0.1 serves bench/streaming.py's TFRecord shards at
--rate per connection (nginx's limit_rate: what an object store or a CDN
gives one connection), and at full speed.  For each, a StreamingDataset
(mode="full", no cache: every epoch downloads every shard) read by
stoker.DataLoader(batch_size=8, num_workers=2, shuffle=True) for --epochs
epochs, with fetchers=None (chosen: FetcherScaling) and with fetchers=2 (the
store's preference, where the choice starts), in the order A B B A.  Prints each
epoch's GB/s and the fetchers running after it, and a JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import stoker  # noqa: E402
from stoker.cache import StreamingDataset  # noqa: E402
from nginx import Nginx  # noqa: E402
from streaming import FEATURES, epoch_rate, served_shards  # noqa: E402


def epochs(url, local, total, n, **kw):
    ds = StreamingDataset(url, local, max_bytes=0, mode="full", features=FEATURES, **kw)
    loader = stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
    out = []
    for e in range(n):
        loader.set_epoch(e)
        out.append({"GBps": epoch_rate(loader, total)[0] / 1e9, "fetchers": ds.stats()["fetchers"]})
    st = ds.stats()
    ds.close()
    shutil.rmtree(local, ignore_errors=True)
    return out, {k: st[k] for k in ("fetchers_auto", "fetchers_most", "fetchers_tried", "stream_buffers")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", default="40m", help="nginx limit_rate per connection")
    ap.add_argument("--shards", type=int, default=32)
    ap.add_argument("--shard-mb", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--dir", default="/var/tmp/stoker-fetcher-scaling-bench")
    args = ap.parse_args()
    www = os.path.join(args.dir, "www")
    total = served_shards(www, args.shards, args.shard_mb)[1]
    server = Nginx(os.path.join(args.dir, "nginx"), www, slow_rate=args.rate).start()
    local = os.path.join(args.dir, "local")
    results = {}
    try:
        for where, url in ((f"limit_rate {args.rate} per connection", server.url + "/slow"),
                           ("full speed", server.url)):
            runs = (("fetchers=None (chosen)", {}), ("fetchers=2", {"fetchers": 2}))
            for label, kw in runs + runs[::-1]:  # (ABBA: a process's first run pays for fresh memory)
                rows, st = epochs(url, local, total, args.epochs, **kw)
                results.setdefault(f"{where}, {label}", []).append({"epochs": rows, "stats": st})
                print(f"{where:32s} {label:24s} GB/s per epoch "
                      + " ".join(f"{r['GBps']:.3f}" for r in rows)
                      + "; fetchers after each " + " ".join(str(r["fetchers"]) for r in rows)
                      + f"; tried {st['fetchers_tried']}, most {st['fetchers_most']}", flush=True)
    finally:
        server.stop()
    print(json.dumps({"bytes": total, "results": results}))


if __name__ == "__main__":
    main()
