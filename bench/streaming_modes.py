"""A cold epoch in each streaming mode, over S3 (SeaweedFS started here on
127.0.0.1): what a user gets from the first epoch of a StreamingDataset with
an empty cache.  8 TFRecord shards of 2,000 records (x: float32[256], y: the
record's id) under s3://bench/ds with an index, as in issue 47.

    python bench/streaming_modes.py [--shards 8] [--records 2000] [--rounds 3]

Rows, each round in an order that rotates, each epoch from a fresh cache
directory and a fresh dataset (constructor included in its time):
  torch:  torch.utils.data.DataLoader(batch_size=256, num_workers=2) over
          StreamingDataset(mode="full") (its workers read through the cache
          directory, stoker._stream_view);
  full:   stoker.DataLoader(batch_size=256, num_workers=2) over
          StreamingDataset() (the default, mode="full");
  cached: the same over StreamingDataset(mode="cached") (the old default):
          the epoch is the shards cached when it begins.
Printed: records delivered of the dataset's, len(ds) right after the
constructor, seconds, records/s and its ratio to torch's row."""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from seaweedfs import SeaweedS3  # noqa: E402  (the tests' server helper)

import torch  # noqa: E402

import stoker  # noqa: E402
from stoker.cache import StreamingDataset, write_index  # noqa: E402
from stoker.io import write_tfrecord  # noqa: E402

FEATURES = {"x": ("float32", (256,)), "y": ("int64", ())}


def epoch(kind, server, local):
    """(records delivered, len(ds) after the constructor, seconds)."""
    t0 = time.perf_counter()
    mode = "cached" if kind == "cached" else "full"
    ds = StreamingDataset("s3://bench/ds", local, max_bytes=1 << 30, mode=mode, features=FEATURES,
                          storage_options=server.options())
    length = len(ds)
    make = torch.utils.data.DataLoader if kind == "torch" else stoker.DataLoader
    ys = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (cached mode's warning that it leaves shards out)
        for b in make(ds, batch_size=256, num_workers=2):
            ys.extend(b["y"].tolist())
    dt = time.perf_counter() - t0
    assert len(ys) == len(set(ys)), kind  # every record it delivers, once
    ds.close()
    return len(ys), length, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    total = a.shards * a.records
    kinds = ["torch", "full", "cached"]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        for s in range(a.shards):
            ids = range(s * a.records, (s + 1) * a.records)
            write_tfrecord(os.path.join(src, f"shard-{s:03d}.tfrecord"),
                           [{"x": np.full(256, i, np.float32), "y": np.int64(i)} for i in ids])
        write_index(src)
        server = SeaweedS3(os.path.join(tmp, "weed"), buckets=("bench",)).start()
        try:
            server.put_dir("bench/ds", src)
            got = {k: [] for k in kinds}
            for r in range(a.rounds):
                for k in kinds[r % 3:] + kinds[:r % 3]:
                    local = os.path.join(tmp, f"cache-{k}-{r}")
                    got[k].append(epoch(k, server, local))
                    shutil.rmtree(local, ignore_errors=True)
        finally:
            server.stop()
    base = statistics.median(n / dt for n, _l, dt in got["torch"])
    print(f"cold epoch, s3:// (SeaweedFS on 127.0.0.1), {a.shards} shards x {a.records} records, "
          f"median of {a.rounds} rounds")
    print(f"{'row':<44}{'records':>16}{'len(ds)':>10}{'seconds':>9}{'records/s':>11}{'vs torch':>9}")
    names = {"torch": "torch DataLoader, StreamingDataset (full)", "full": "stoker DataLoader, mode='full' (default)",
             "cached": "stoker DataLoader, mode='cached'"}
    for k in kinds:
        n, length, dt = sorted(got[k], key=lambda t: t[2])[len(got[k]) // 2]
        print(f"{names[k]:<44}{f'{n:,} of {total:,}':>16}{length:>10,}{dt:>9.2f}{n / dt:>11,.0f}"
              f"{n / dt / base:>8.2f}x")


if __name__ == "__main__":
    main()
