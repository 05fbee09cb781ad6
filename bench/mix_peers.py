"""Mixing 100 sources by weight: stoker.Mix against the mixers that install
here (issue 49), in the same run: Grain's MapDataset.mix, torchdata's
MultiNodeWeightedSampler, litData's CombinedStreamingDataset and tf.data's
sample_from_datasets.  Each reads the same records (float32[32]: the
source's number, the record's number, then filler) from 100 sources of
Zipf sizes with Zipf weights, cycling a source that runs out, no shuffle,
batches of 256, and each runs in a process of its own, one after another,
alternating the order per round.  Reports samples/s after the first
batch, the time to the first batch, the threads the mixer started in the process tree (the most
seen, sampled at 20 Hz), the tree's PSS growth past the framework's import,
and the
proportion error: the largest |c_i(n) - w_i * n| over every source i and
every prefix n of the delivered samples (1 or less: exact at every prefix;
a random draw per sample strays by about sqrt(w_i * n)).

    python -m venv /tmp/peers && /tmp/peers/bin/pip install -c constraints.txt torch==2.13.0 \\
        grain torchdata litdata tensorflow-cpu          # constraints.txt: torch==2.13.0
    PYTHONPATH=python /tmp/peers/bin/python bench/mix_peers.py [--samples 300000] [--rounds 3]

A mixer missing from the environment is reported as not installed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

SOURCES, WIDTH, BATCH = 100, 32, 256
MIXERS = ("stoker", "grain", "torchdata", "litdata", "tf.data")


def layout(records: int):
    z = 1 / np.arange(1, SOURCES + 1) ** 1.1
    sizes = np.maximum(16, (z / z.sum() * records).astype(int))
    return sizes, (z / z.sum()).tolist()


def write(d: str, records: int) -> None:
    sizes, _ = layout(records)
    for i, n in enumerate(sizes):
        rows = np.zeros((n, WIDTH), np.float32)
        rows[:, 0], rows[:, 1] = i, np.arange(n)
        np.save(os.path.join(d, f"s{i}.npy"), rows)


def write_litdata(d: str) -> None:
    """Each source in litData's chunk format (its BinaryWriter: what
    litdata.optimize writes, without a process per source)."""
    from litdata.streaming.writer import BinaryWriter
    for i in range(SOURCES):
        w = BinaryWriter(os.path.join(d, f"lit{i}"), chunk_bytes="4MB")
        for j, row in enumerate(np.load(os.path.join(d, f"s{i}.npy"))):
            w.add_item(j, row)
        w.done()
        w.merge()


# ---- the mixers: each yields batches as numpy arrays [B, WIDTH] -------------

def first(batches, samples):
    """The batches of an endless mixer up to `samples` samples."""
    left = samples
    for b in batches:
        b = b[:left]
        left -= len(b)
        yield b
        if not left:
            return


def stoker_batches(d, weights, samples):
    import stoker
    srcs = [stoker.io.NpyDataset(os.path.join(d, f"s{i}.npy")) for i in range(SOURCES)]
    mix = stoker.Mix(srcs, weights, epoch_samples=samples)
    for b in stoker.DataLoader(mix, batch_size=BATCH, num_workers=2, output="numpy"):
        yield b


def grain_batches(d, weights, samples):
    import grain
    srcs = [grain.MapDataset.source(np.load(os.path.join(d, f"s{i}.npy"), mmap_mode="r")).repeat()
            for i in range(SOURCES)]
    ds = grain.MapDataset.mix(srcs, weights)[:samples].to_iter_dataset().batch(BATCH)
    ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    yield from ds


def torchdata_batches(d, weights, samples):
    import torchdata.nodes as tn
    nodes = {str(i): tn.IterableWrapper(np.load(os.path.join(d, f"s{i}.npy"), mmap_mode="r"))
             for i in range(SOURCES)}
    mixed = tn.MultiNodeWeightedSampler(nodes, {str(i): w for i, w in enumerate(weights)},
                                        stop_criteria="CYCLE_FOREVER", seed=0)
    batches = tn.Prefetcher(tn.Batcher(mixed, batch_size=BATCH), prefetch_factor=4)
    yield from first((np.stack(b) for b in tn.Loader(batches)), samples)


def litdata_batches(d, weights, samples):
    import litdata
    srcs = [litdata.StreamingDataset(os.path.join(d, f"lit{i}")) for i in range(SOURCES)]
    mixed = litdata.CombinedStreamingDataset(srcs, weights=weights, iterate_over_all=False, seed=0)
    yield from first((np.asarray(b) for b in litdata.StreamingDataLoader(mixed, batch_size=BATCH, num_workers=2)),
                     samples)


def tf_batches(d, weights, samples):
    import tensorflow as tf
    srcs = [tf.data.Dataset.from_tensor_slices(np.load(os.path.join(d, f"s{i}.npy"))).repeat()
            for i in range(SOURCES)]
    ds = tf.data.Dataset.sample_from_datasets(srcs, weights, seed=0).take(samples).batch(BATCH)
    yield from ds.prefetch(tf.data.AUTOTUNE).as_numpy_iterator()


MODULES = {"stoker": "stoker", "grain": "grain", "torchdata": "torchdata.nodes", "litdata": "litdata",
           "tf.data": "tensorflow"}
BATCHES = {"stoker": stoker_batches, "grain": grain_batches, "torchdata": torchdata_batches,
           "litdata": litdata_batches, "tf.data": tf_batches}


# ---- one mixer in this process ---------------------------------------------

def tree_pids(pid: int) -> list:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def tree_threads_pss():
    threads, pss = 0, 0
    for p in tree_pids(os.getpid()):
        try:
            threads += len(os.listdir(f"/proc/{p}/task"))
            with open(f"/proc/{p}/smaps_rollup") as f:
                pss += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) << 10
        except (OSError, StopIteration):
            pass
    return threads, pss


def proportion_error(ids: np.ndarray, weights) -> float:
    w = np.asarray(weights)
    worst = 0.0
    counts = np.zeros(SOURCES)
    step = max(1, len(ids) // 1000)
    for n, s in enumerate(ids, 1):
        counts[int(s)] += 1
        if n <= 2000 or n % step == 0:
            worst = max(worst, float(np.abs(counts - w * n).max()))
    return worst


def run_one(name: str, d: str, samples: int) -> dict:
    _, weights = layout(int(open(os.path.join(d, "records")).read()))
    import torch  # noqa: F401  (imported by most of them: its memory is nobody's mix)
    __import__(MODULES[name])  # (the framework's own import is not the mix's cost)
    base_threads, base_pss = tree_threads_pss()
    peak = {"threads": base_threads, "pss": base_pss}
    done = threading.Event()

    def watch():
        while not done.wait(0.05):
            t, p = tree_threads_pss()
            peak["threads"], peak["pss"] = max(peak["threads"], t), max(peak["pss"], p)
    threading.Thread(target=watch, daemon=True).start()
    ids = []
    t0 = time.perf_counter()
    for b in BATCHES[name](d, weights, samples):
        ids.append(np.asarray(b)[:, 0].copy())
        if len(ids) == 1:
            t1 = time.perf_counter()
    seconds = time.perf_counter() - t1
    done.set()
    ids = np.concatenate(ids)
    return {"samples": int(len(ids)), "rate": (len(ids) - len(ids[:BATCH])) / seconds, "first": t1 - t0,
            "threads": peak["threads"] - base_threads - 1,  # started by the mixer (less the watcher)
            "pss_mb": (peak["pss"] - base_pss) / 2 ** 20, "error": proportion_error(ids, weights)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=200_000, help="records in all the sources together")
    p.add_argument("--samples", type=int, default=300_000, help="samples each mixer delivers")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(run_one(a.one, a.dir, a.samples)))
        return
    with tempfile.TemporaryDirectory() as d:
        write(d, a.records)
        with open(os.path.join(d, "records"), "w") as f:
            f.write(str(a.records))
        have = []
        for name in MIXERS:
            probe = subprocess.run([sys.executable, "-c", f"import {MODULES[name]}"], capture_output=True)
            if probe.returncode == 0:
                have.append(name)
            else:
                print(f"{name}: not installed")
        if "litdata" in have:
            write_litdata(d)
        res = {n: [] for n in have}
        for r in range(a.rounds):
            for name in (have if r % 2 == 0 else have[::-1]):
                out = subprocess.run([sys.executable, __file__, "--one", name, "--dir", d, "--samples", str(a.samples)],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"{name} failed:\n{out.stderr[-2000:]}")
                    continue
                res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{SOURCES} sources of Zipf sizes ({a.records:,} records of {WIDTH} float32) and Zipf weights, "
              f"{a.samples:,} samples each, batch {BATCH}; median of {a.rounds} rounds")
        print("| mixer | samples/s | vs stoker | first batch | threads started | PSS growth | proportion error |")
        print("|---|---|---|---|---|---|---|")
        ref = statistics.median(x["rate"] for x in res["stoker"]) if res.get("stoker") else None
        for name in have:
            if not res[name]:
                continue
            rate = statistics.median(x["rate"] for x in res[name])
            first = statistics.median(x["first"] for x in res[name])
            print(f"| {name} | {rate:,.0f} | {rate / ref if ref else float('nan'):.2f}x | {first * 1e3:.0f} ms | "
                  f"{max(x['threads'] for x in res[name])} | {statistics.median(x['pss_mb'] for x in res[name]):.0f} MB | "
                  f"{max(x['error'] for x in res[name]):.2f} |")


if __name__ == "__main__":
    main()
