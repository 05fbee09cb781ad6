"""The streaming cache against curl and against the native read path.

    python bench/streaming.py --shards 32 --shard-mb 32 --rounds 5

TFRecord shards of 1 MiB float32 records (--shards of --shard-mb each) are
served by a real nginx on 127.0.0.1 (the test suite's, tests/python/nginx.py;
one worker, sendfile off) from the page cache.  Per round, in this order:
  curl:      `curl` downloading every shard to /dev/null over one kept-alive
             connection, and with --parallel --parallel-max 2 and 3;
  streaming: stoker.cache.StreamingDataset(mode="full"), 3 fetchers,
             shuffle_window=2, prefetch=4, read by stoker.DataLoader(
             batch_size=8, num_workers=2, shuffle=True); rate = the dataset's
             bytes / the epoch's wall time (downloads, CRC-32C checks,
             decoding into the pool); for the first epoch with no cache
             also the time from iter() to the first batch:
               no cache:   max_bytes=0, every shard through memory; a fresh
                           dataset's first epoch, then its second; twice:
                           the fetchers where the scheduler puts them, and
                           confined to this process's last CPU
                           (fetcher_cpus=[N]: on two cores nginx then has
                           the other to itself; which goes first alternates);
               half cache: an empty cache of half the dataset's size on
                           /dev/shm and on --dir's disk (half the shards are
                           written there, fsynced; the rest stream through
                           memory);
  curl again (1, 2 and 3 connections), and curl into files on /dev/shm;
  cached:    a StreamingDataset whose cache holds every shard against
             stoker.io.TFRecordDataset over the same files with the same
             loader: four epochs each, alternating, the medians.
"vs curl" divides by the best of curl's 1-, 2- and 3-connection rates, each
the mean of its run before and after the streaming runs of the round (one
nginx worker: more connections than that gain curl nothing).
Also per round: the TCP segments the machine retransmitted during the
first no-cache epochs and during curl's 3-connection run before it
(/proc/net/snmp; on loopback they are spurious: reordered or late-acknowledged
segments sent again, which costs the server's CPU).
With --pin, nginx runs on one CPU and everything else (curl, stoker) on
another: the server with a core of its own, as a remote store has its own
machine, instead of taking CPU from whichever client uses more of it.
Prints per round and the medians; for the two targets (no cache against
curl, 0.8x; cached against native, 0.9x) also how many rounds reach them and
a 95% interval for the median over rounds (percentile bootstrap, fixed seed):
on this shared 2-core machine single rounds move by 0.2-0.3, so a median of
five says little about "reliably"; run 15-20 rounds for that.  A JSON line last.
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
FETCHERS = 3
CURL_CONNECTIONS = (1, 2, 3)  # curl's best of these is the reference
FEATURES = {"x": ("float32", (RECORD,))}


def make_shards(root, shards, shard_mb):
    """The shards in `root`, written again unless a run with the same
    --shards and --shard-mb wrote them (a stale set is removed first: the
    index lists every shard file in the directory)."""
    made = os.path.join(root, "made.json")
    want = {"shards": shards, "shard_mb": shard_mb, "record": RECORD}
    if os.path.exists(os.path.join(root, "index.txt")) and os.path.exists(made):
        with open(made) as f:
            if json.load(f) == want:
                return
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for s in range(shards):
        write_tfrecord_shard(os.path.join(root, f"shard-{s:04d}.tfrecord"), s, shard_mb)
    write_index(root)
    with open(made, "w") as f:
        json.dump(want, f)


def write_tfrecord_shard(path, s, shard_mb):
    rng = np.random.default_rng(s)
    io.write_tfrecord(path, ({"x": rng.random(RECORD, dtype=np.float32)} for _ in range(shard_mb)))


def served_shards(root, shards, shard_mb):
    """The shards in `root` (make_shards), each read once so that a server
    serves them from memory: their names, sorted, and their bytes."""
    make_shards(root, shards, shard_mb)
    names = sorted(f for f in os.listdir(root) if f.endswith(".tfrecord"))
    for f in names:
        read_through(os.path.join(root, f))
    return names, dataset_bytes(root)


def read_through(path):
    """Reads a file once, so that a server then serves it from the page cache."""
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


def dataset_bytes(root):
    return sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root) if f.endswith(".tfrecord"))


def tcp_retransmits():
    """The kernel's count of TCP segments retransmitted (/proc/net/snmp,
    RetransSegs: every socket on the machine), or None where it cannot be
    read.  On loopback nothing is lost; what is sent again is what the
    sender took for lost (reordered or not yet acknowledged) and the
    receiver then drops as a duplicate."""
    try:
        with open("/proc/net/snmp") as f:
            tcp = [line.split() for line in f if line.startswith("Tcp:")]
        return int(tcp[1][tcp[0].index("RetransSegs")])
    except (OSError, ValueError, IndexError):
        return None


def retransmitted(run):
    """run()'s result and the TCP segments retransmitted while it ran (None
    where the count cannot be read)."""
    before = tcp_retransmits()
    out = run()
    after = tcp_retransmits()
    return out, (after - before if before is not None and after is not None else None)


def curl_rate(urls, total, connections, into=None):
    """curl's rate for every URL, to /dev/null or into files in `into`."""
    cmd = ["curl", "-s", "--no-progress-meter", "--fail"]
    if connections > 1:
        cmd += ["--parallel", "--parallel-max", str(connections)]
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


def median_interval(values, resamples=10000, seed=0):
    """95% percentile-bootstrap interval of the median of `values`."""
    rng = np.random.default_rng(seed)
    v = np.asarray(values, dtype=np.float64)
    meds = np.median(rng.choice(v, size=(resamples, len(v)), replace=True), axis=1)
    return float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def target_summary(rows, key, target):
    """The median of `key` over the rounds, its 95% interval and how many
    rounds reach `target`, as one phrase for the summary line."""
    v = [r[key] for r in rows]
    lo, hi = median_interval(v)
    return (f"{statistics.median(v):.2f}x (95% interval {lo:.2f}-{hi:.2f}; "
            f"{sum(x >= target for x in v)} of {len(v)} rounds >= {target}x)")


def epoch_rate(loader, total, first=None):
    """The epoch's rate; with a list `first`, appends the seconds from iter()
    to the first batch."""
    t0 = time.perf_counter()
    n = 0
    for b in loader:
        if n == 0 and first is not None:
            first.append(time.perf_counter() - t0)
        n += b["x"].numel() * 4
    dt = time.perf_counter() - t0
    return total / dt, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=32)
    ap.add_argument("--shard-mb", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    ap.add_argument("--pin", action="store_true",
                    help="nginx on CPU 0, this process (curl, stoker's threads) on CPU 1: the server with a core of "
                         "its own, as a remote store has its own machine")
    args = ap.parse_args()
    www = os.path.join(args.dir, "www")
    names, total = served_shards(www, args.shards, args.shard_mb)
    server = Nginx(os.path.join(args.dir, "nginx"), www).start()
    if args.pin:
        if len(os.sched_getaffinity(0)) < 2:
            raise SystemExit("--pin needs two CPUs")
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(server.proc.pid, {cpus[0]})
        os.sched_setaffinity(0, {cpus[1]})  # threads and children started from here on inherit it
    # The no-cache epochs run twice per round: fetchers where the scheduler
    # puts them, and confined to this process's last CPU (fetcher_cpus).
    fetcher_cpus = [max(os.sched_getaffinity(0))]
    rows = []
    try:
        urls = [f"{server.url}/{n}" for n in names]
        for r in range(args.rounds):
            before = [curl_rate(urls, total, k) for k in CURL_CONNECTIONS[:-1]]
            last, curl_retrans = retransmitted(lambda: curl_rate(urls, total, CURL_CONNECTIONS[-1]))
            before.append(last)
            streamed = {}
            first_batch_ms, stoker_retrans = {}, {}
            # No cache with the fetchers wherever the scheduler puts them and
            # confined to one CPU (fetcher_cpus), which goes first alternating.
            no_cache = [("none", None), ("none_fcpu", fetcher_cpus)][::-1 if r % 2 else 1]
            for where, cold, budget, cpus in ([(w, os.path.join(args.dir, "cold"), 0, c) for w, c in no_cache] +
                                              [("shm", "/dev/shm/stoker-streaming-cold", total // 2, None),
                                               ("disk", os.path.join(args.dir, "cold"), total // 2, None)]):
                shutil.rmtree(cold, ignore_errors=True)
                ds = StreamingDataset(server.url, cold, max_bytes=budget, mode="full", features=FEATURES,
                                      shuffle_window=2, prefetch=4, fetchers=FETCHERS, fetcher_cpus=cpus)
                loader = stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
                first = []
                (s_rate, n), retrans = retransmitted(lambda: epoch_rate(loader, total, first))
                assert n == args.shards * args.shard_mb * RECORD * 4
                streamed[where] = (s_rate, ds.stats())
                if where.startswith("none"):
                    first_batch_ms[where] = first[0] * 1e3
                    stoker_retrans[where] = retrans
                    loader.set_epoch(1)  # its second epoch: buffers and connections warm
                    streamed[where + "_epoch2"] = (epoch_rate(loader, total)[0], ds.stats())
                ds.close()
                shutil.rmtree(cold, ignore_errors=True)
            after = [curl_rate(urls, total, k) for k in CURL_CONNECTIONS]
            means = [(a + b) / 2 for a, b in zip(before, after)]
            c3 = curl_rate(urls, total, 2, into="/dev/shm/stoker-streaming-curl")
            dd = dd_rate(os.path.join(args.dir, "dd.bin"), total)
            warm = os.path.join(args.dir, "warm")
            if r == 0:
                shutil.rmtree(warm, ignore_errors=True)
            full = StreamingDataset(server.url, warm, max_bytes=2 * total, mode="full", features=FEATURES)
            epoch_rate(stoker.DataLoader(full, batch_size=8, shuffle=True, num_workers=2), total)  # fills / warms
            assert full.stats()["downloads"] == (args.shards if r == 0 else 0)
            native = io.TFRecordDataset([os.path.join(warm, n) for n in names], features=FEATURES,
                                        index_dir=os.path.join(args.dir, "index"))
            # Four epochs each, alternating which goes first (an epoch of
            # 1 GB takes a tenth of a second here); the medians.
            cached_rates, native_rates = [], []
            for k in range(4):
                for which in (("cached", "native") if k % 2 == 0 else ("native", "cached")):
                    d, into = (full, cached_rates) if which == "cached" else (native, native_rates)
                    into.append(epoch_rate(stoker.DataLoader(d, batch_size=8, shuffle=True, num_workers=2), total)[0])
            full.close()
            c_rate, n_rate = statistics.median(cached_rates), statistics.median(native_rates)
            curl = max(means)
            row = {}
            for k, m, a, b in zip(CURL_CONNECTIONS, means, before, after):
                row[f"curl_{k}conn_GBps"] = m / 1e9
                row[f"curl_{k}conn_before_after_GBps"] = [a / 1e9, b / 1e9]
            for where in ("none", "none_fcpu"):
                row[f"retransmitted_streaming_{where}"] = stoker_retrans[where]
                row[f"streaming_{where}_first_batch_ms"] = first_batch_ms[where]
            row |= {f"retransmitted_curl_{CURL_CONNECTIONS[-1]}conn_before": curl_retrans,
                    "curl_to_shm_files_GBps": c3 / 1e9, "dd_fsync_GBps": dd / 1e9,
                    "cached_GBps": c_rate / 1e9, "native_GBps": n_rate / 1e9, "cached_vs_native": c_rate / n_rate}
            for where, (rate_, st) in streamed.items():
                row[f"streaming_{where}_GBps"] = rate_ / 1e9
                row[f"streaming_{where}_vs_curl"] = rate_ / curl
                row[f"evictions_{where}"] = st["evictions"]
            rows.append(row)
            conns = ", ".join(f"{a / 1e9:.2f}/{b / 1e9:.2f} ({k} conn{'s' if k > 1 else ''})"
                              for k, a, b in zip(CURL_CONNECTIONS, before, after))

            def no_cache(where):
                return (f"{row[f'streaming_{where}_GBps']:.2f} GB/s = {row[f'streaming_{where}_vs_curl']:.2f}x curl "
                        f"(first batch {first_batch_ms[where]:.0f} ms; 2nd epoch "
                        f"{row[f'streaming_{where}_epoch2_GBps']:.2f} = "
                        f"{row[f'streaming_{where}_epoch2_vs_curl']:.2f}x; TCP segments retransmitted "
                        f"{stoker_retrans[where]})")
            print(f"round {r}: curl {conns} GB/s before/after (TCP segments retransmitted in the "
                  f"{CURL_CONNECTIONS[-1]}-connection run before: {curl_retrans}), {c3 / 1e9:.2f} into files on "
                  f"/dev/shm; streaming full, no cache: {no_cache('none')}, with fetcher_cpus={fetcher_cpus} "
                  f"{no_cache('none_fcpu')}; half cache on /dev/shm {row['streaming_shm_GBps']:.2f} = "
                  f"{row['streaming_shm_vs_curl']:.2f}x, on disk {row['streaming_disk_GBps']:.2f} = "
                  f"{row['streaming_disk_vs_curl']:.2f}x (dd conv=fsync {dd / 1e9:.2f}); cached {c_rate / 1e9:.2f} "
                  f"GB/s vs native {n_rate / 1e9:.2f} = {row['cached_vs_native']:.2f}x", flush=True)
    finally:
        server.stop()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]
           if not isinstance(rows[0][k], list) and all(r[k] is not None for r in rows)}

    def no_cache_median(where):
        return (f"{med[f'streaming_{where}_vs_curl']:.2f}x curl to /dev/null (2nd epoch "
                f"{med[f'streaming_{where}_epoch2_vs_curl']:.2f}x; first batch "
                f"{med[f'streaming_{where}_first_batch_ms']:.0f} ms"
                + (f"; TCP segments retransmitted {med[f'retransmitted_streaming_{where}']:.0f}"
                   if f"retransmitted_streaming_{where}" in med else "") + ")")
    print(f"median of {len(rows)}{' (pinned)' if args.pin else ''}: streaming full, no cache "
          f"{no_cache_median('none')}, with fetcher_cpus={fetcher_cpus} {no_cache_median('none_fcpu')}; half cache "
          f"on /dev/shm {med['streaming_shm_vs_curl']:.2f}x, on disk {med['streaming_disk_vs_curl']:.2f}x; cached "
          f"{med['cached_vs_native']:.2f}x native ({total / 1e9:.2f} GB in {args.shards} shards)")
    print(f"targets over {len(rows)} rounds: no cache, first epoch vs curl "
          f"{target_summary(rows, 'streaming_none_vs_curl', 0.8)}, with fetcher_cpus "
          f"{target_summary(rows, 'streaming_none_fcpu_vs_curl', 0.8)}; second epoch "
          f"{target_summary(rows, 'streaming_none_epoch2_vs_curl', 0.8)}, with fetcher_cpus "
          f"{target_summary(rows, 'streaming_none_fcpu_epoch2_vs_curl', 0.8)}; cached vs native "
          f"{target_summary(rows, 'cached_vs_native', 0.9)}")
    print(json.dumps({"rounds": rows, "median": med, "bytes": total, "pinned": args.pin}))


if __name__ == "__main__":
    main()
