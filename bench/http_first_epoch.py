"""A fresh process's first epoch in full mode from nginx, against curl
(issue 29, point 3: curl's speed with the defaults).

    python bench/http_first_epoch.py --shards 16 --shard-mb 64 --rounds 6 [--format tar] [--base-site DIR]

The shards are bench/streaming.py's (TFRecord, 1 MiB float32 records, made
once under --dir), or with --format tar WebDataset-style tar shards of 1 MiB
samples (the shape the issue names: no per-record CRC), served by a real
nginx on 127.0.0.1 from the page cache.
Per round, in an order that rotates from round to round:
  curl 1, curl 2:  `curl` downloading every shard to /dev/null over one kept-
                   alive connection, and two (--parallel);
  each --variant:  in a new process (as a job starts: none of its memory
                   touched before), StreamingDataset(url, mode="full",
                   max_bytes=0: every shard through memory) with the variant's
                   options, read by stoker.DataLoader(batch_size=8,
                   shuffle=True, num_workers=2); timed inside that process
                   from the constructor to the epoch's end.
With --settle, each run comes after touching and freeing that much memory.
"vs curl" divides by the better of curl's two rates in that round.  CPU-s per
GB is the client's (curl's, or the stoker process's), the server's apart.
The default variants: "" (every option at its default) and
"stream_buffers=12" (the default count before: 2 * (shuffle_window +
fetchers)).  Prints per round, the medians, and a JSON line last.
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

from stoker._procfs import cpu_seconds, tree_pids  # noqa: E402
from nginx import Nginx  # noqa: E402
from fresh_memory import settle  # noqa: E402
from streaming import read_through, served_shards  # noqa: E402

CHILD = """
import json, os, sys, time
import stoker
from stoker.cache import StreamingDataset
url, local, total, options, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
kw = eval("dict(" + options + ")")
if fmt == "tar":
    key, kw["fields"] = "x.bin", {"x.bin": ("uint8", (1 << 20,))}
else:
    key, kw["features"] = "x", {"x": ("float32", (1 << 18,))}
c0, t0 = time.process_time(), time.perf_counter()
ds = StreamingDataset(url, local, max_bytes=0, mode="full", **kw)
n = 0
for b in stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2):
    n += b[key].numel() * b[key].element_size()
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
st = ds.stats()
print(json.dumps({"s": dt, "cpu_s": cpu, "bytes": n, "fetchers": st["fetchers"],
                  "fetcher_cpus": st["fetcher_cpus"], "stream_buffers": st["stream_buffers"]}))
"""


def served_tar_shards(root, shards, shard_mb):
    """--format tar: `shards` tar shards of `shard_mb` samples of 1 MiB under
    `root` (made once per shape), read once so that nginx serves them from
    memory: their names, sorted, and their bytes."""
    import numpy as np
    from stoker.cache import write_index
    from stoker.io import write_tar_shards
    made = os.path.join(root, "made.json")
    want = {"shards": shards, "shard_mb": shard_mb}
    fresh = True
    if os.path.exists(made):
        with open(made) as f:
            fresh = json.load(f) != want
    if fresh:
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        block = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8)
        write_tar_shards(os.path.join(root, "shard-%04d.tar"),
                         ({"x.bin": np.roll(block, i)} for i in range(shards * shard_mb)), maxcount=shard_mb)
        write_index(root)
        with open(made, "w") as f:
            json.dump(want, f)
    names = sorted(f for f in os.listdir(root) if f.endswith(".tar"))
    for f in names:
        read_through(os.path.join(root, f))
    return names, sum(os.path.getsize(os.path.join(root, f)) for f in names)


def curl_command(urls, connections):
    """curl downloading every one of `urls` to /dev/null over `connections`
    kept-alive connections (--parallel for more than one)."""
    cmd = ["curl", "-s", "--no-progress-meter", "--fail"]
    if connections > 1:
        cmd += ["--parallel", "--parallel-max", str(connections)]
    for u in urls:
        cmd += ["-o", "/dev/null", u]
    return cmd


def cpu_of(pids):
    """CPU-seconds used so far by these processes (nginx's master and worker)."""
    return sum(cpu_seconds(p) or 0.0 for p in pids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--shard-mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    ap.add_argument("--variant", action="append",
                    help="StreamingDataset keyword arguments as Python, e.g. 'fetcher_cpus=[1]' (repeatable)")
    ap.add_argument("--format", choices=("tfrecord", "tar"), default="tfrecord",
                    help="the shards: TFRecord (bench/streaming.py's) or tar (1 MiB samples, no per-record CRC)")
    ap.add_argument("--base-site", metavar="DIR",
                    help="another build of stoker (pip install --target DIR): a row for its defaults too, same rounds")
    ap.add_argument("--settle", type=float, default=0, metavar="GIB",
                    help="before each run, touch and free this much memory (bench/fresh_memory.py's settle())")
    args = ap.parse_args()
    variants = args.variant if args.variant is not None else ["", "stream_buffers=12"]
    if args.format == "tar":
        www = os.path.join(args.dir, "www-tar")
        names, total = served_tar_shards(www, args.shards, args.shard_mb)
    else:
        www = os.path.join(args.dir, "www")
        names, total = served_shards(www, args.shards, args.shard_mb)
    local = os.path.join(args.dir, "first-epoch")
    server = Nginx(os.path.join(args.dir, "nginx"), www).start()
    nginx = tree_pids(server.proc.pid)
    urls = [f"{server.url}/{n}" for n in names]
    gb = total / 1e9

    def curl(k):
        cmd = curl_command(urls, k)
        t = os.times()
        s0, t0 = cpu_of(nginx), time.perf_counter()
        subprocess.run(cmd, check=True)
        dt = time.perf_counter() - t0
        u = os.times()
        client = (u.children_user - t.children_user) + (u.children_system - t.children_system)
        return {"GBps": gb / dt, "client_cpu_per_GB": client / gb, "server_cpu_per_GB": (cpu_of(nginx) - s0) / gb}

    def stoker_run(options, site=None):
        shutil.rmtree(local, ignore_errors=True)
        s0 = cpu_of(nginx)
        env = dict(os.environ, PYTHONPATH=site) if site else None
        out = subprocess.run([sys.executable, "-c", CHILD, server.url, local, str(total), options, args.format],
                             check=True, capture_output=True, text=True, env=env)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        assert r["bytes"] == args.shards * args.shard_mb * (1 << 20), r
        shutil.rmtree(local, ignore_errors=True)
        return {"GBps": gb / r["s"], "client_cpu_per_GB": r["cpu_s"] / gb,
                "server_cpu_per_GB": (cpu_of(nginx) - s0) / gb,
                "fetchers": r["fetchers"], "fetcher_cpus": r["fetcher_cpus"], "stream_buffers": r["stream_buffers"]}

    kinds = [("curl 1", lambda: curl(1)), ("curl 2", lambda: curl(2))]
    kinds += [(f"stoker {v or '(defaults)'}", (lambda v: lambda: stoker_run(v))(v)) for v in variants]
    if args.base_site:
        kinds.append(("  the defaults, base build", lambda: stoker_run("", args.base_site)))
    rows = {k: [] for k, _ in kinds}
    try:
        for r in range(args.rounds):
            k = r % len(kinds)
            for label, run in kinds[k:] + kinds[:k]:
                settle(args.settle)
                rows[label].append(run())
            best = max(rows["curl 1"][-1]["GBps"], rows["curl 2"][-1]["GBps"])
            print(f"round {r}: " + "; ".join(
                f"{label} {rows[label][-1]['GBps']:.2f} GB/s ({rows[label][-1]['GBps'] / best:.2f}x), "
                f"{rows[label][-1]['client_cpu_per_GB']:.2f} CPU-s/GB" for label, _ in kinds), flush=True)
    finally:
        server.stop()
        shutil.rmtree(local, ignore_errors=True)
    best = [max(a["GBps"], b["GBps"]) for a, b in zip(rows["curl 1"], rows["curl 2"])]
    print(f"medians of {args.rounds} rounds ({gb:.2f} GB in {len(names)} shards):")
    summary = {}
    for label, v in rows.items():
        ratio = [x["GBps"] / c for x, c in zip(v, best)]
        med = {m: statistics.median(x[m] for x in v) for m in ("GBps", "client_cpu_per_GB", "server_cpu_per_GB")}
        med["vs_curl"] = statistics.median(ratio)
        summary[label] = med
        extra = ""
        if "fetchers" in v[0]:
            extra = f"; fetchers {v[0]['fetchers']}, fetcher_cpus {v[0]['fetcher_cpus']}, buffers {v[0]['stream_buffers']}"
        print(f"  {label:32s} {med['GBps']:.2f} GB/s, {med['vs_curl']:.2f}x curl (per round "
              f"{' '.join(f'{x:.2f}' for x in ratio)}); CPU-s/GB client {med['client_cpu_per_GB']:.2f}, "
              f"server {med['server_cpu_per_GB']:.2f}{extra}")
    print(json.dumps({"rounds": rows, "median": summary, "bytes": total}))


if __name__ == "__main__":
    main()
