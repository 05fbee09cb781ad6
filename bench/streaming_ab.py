"""A/B of StreamingDataset options: configurations alternate, each epoch in a
fresh process, and the medians are compared (this machine drifts by more than
the differences measured, so only runs alternating within one session
compare).

    python bench/streaming_ab.py --shards 128 --rounds 4 \\
        normal: low:reader_priority=low f3:fetchers=3 f3low:fetchers=3,reader_priority=low

Each configuration is NAME:KEY=VALUE,...; keys: fetchers, stream_buffers,
shuffle_window, prefetch, num_workers, reader_priority, pin (1: nginx on CPU 0,
the loader on CPU 1).  One epoch per run: a fresh full-mode dataset with no
cache (max_bytes=0) over nginx on 127.0.0.1 (bench/streaming.py's shards and
server), read by stoker.DataLoader(batch_size=8, shuffle=True).  Prints each
run's GB/s and the medians.
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
DEFAULTS = {"fetchers": 2, "stream_buffers": 0, "shuffle_window": 2, "prefetch": 4, "num_workers": 2,
            "reader_priority": "normal", "pin": 0}


def parse_config(text):
    name, _, rest = text.partition(":")
    if not name:
        raise SystemExit(f"configuration {text!r}: NAME:KEY=VALUE,... (NAME: may have no keys)")
    cfg = dict(DEFAULTS)
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in DEFAULTS:
            raise SystemExit(f"configuration {name}: unknown key {key!r} (known: {', '.join(DEFAULTS)})")
        cfg[key] = value if key == "reader_priority" else int(value)
    return name, cfg


def one_epoch(cfg, root):
    """In a child process: one epoch of a fresh dataset; prints GB/s."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    import stoker
    from nginx import Nginx
    from stoker.cache import StreamingDataset
    from streaming import FEATURES, dataset_bytes, epoch_rate
    www = os.path.join(root, "www")
    total = dataset_bytes(www)
    server = Nginx(os.path.join(root, "nginx-ab"), www).start()
    try:
        if cfg["pin"]:
            cpus = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(server.proc.pid, {cpus[0]})
            os.sched_setaffinity(0, {cpus[1]})
        cold = os.path.join(root, "cold-ab")
        shutil.rmtree(cold, ignore_errors=True)
        ds = StreamingDataset(server.url, cold, max_bytes=0, mode="full", features=FEATURES,
                              fetchers=cfg["fetchers"], stream_buffers=cfg["stream_buffers"],
                              shuffle_window=cfg["shuffle_window"], prefetch=cfg["prefetch"])
        loader = stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=cfg["num_workers"],
                                   reader_priority=cfg["reader_priority"])
        rate, _ = epoch_rate(loader, total)
        ds.close()
        shutil.rmtree(cold, ignore_errors=True)
        print(json.dumps({"GBps": rate / 1e9}))
    finally:
        server.stop()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        one_epoch(json.loads(sys.argv[2]), sys.argv[3])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=128)
    ap.add_argument("--shard-mb", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-ab")
    ap.add_argument("configs", nargs="+", help="NAME:KEY=VALUE,...")
    args = ap.parse_args()
    configs = [parse_config(c) for c in args.configs]
    sys.path.insert(0, HERE)
    from streaming import make_shards
    make_shards(os.path.join(args.dir, "www"), args.shards, args.shard_mb)
    rates = {name: [] for name, _ in configs}
    for r in range(args.rounds):
        for name, cfg in configs:
            t = time.perf_counter()
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(cfg), args.dir],
                                 capture_output=True, text=True)
            lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
            if out.returncode != 0 or not lines:
                raise SystemExit(f"{name}: the run failed:\n{out.stdout}\n{out.stderr}")
            rates[name].append(json.loads(lines[-1])["GBps"])
            print(f"round {r} {name}: {rates[name][-1]:.2f} GB/s ({time.perf_counter() - t:.0f} s)", flush=True)
    for name, v in rates.items():
        print(f"{name}: median {statistics.median(v):.2f} GB/s ({', '.join(f'{x:.2f}' for x in v)})")
    print(json.dumps({"medians": {n: statistics.median(v) for n, v in rates.items()}, "runs": rates}))


if __name__ == "__main__":
    main()
