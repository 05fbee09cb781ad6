"""When a cold S3 epoch's bytes arrive against when its batches do (issue
29): is the gap to boto3 the download or the readers' tail?

    python bench/s3_timeline.py [--rounds 3] [--shards 32] [--shard-mib 16]

bench/s3_epoch.py's shards and SeaweedFS server; each round one cold stoker
epoch in a fresh process (full mode, no cache, 2 fetchers, DataLoader with
batches of 32 and 2 reader threads, no shuffle), then boto3 with 4 threads
over the same objects.  Inside the stoker process a thread polls stats()
every 2 ms: bytes_downloaded counts whole shards, so its last change is
when the last shard finished.  Prints, from the constructor's start:
constructor, first shard, first batch, last shard, last batch, and the
seconds with a download in flight (stats' fetch_seconds)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, HERE)


def child(endpoint, local):
    import s3_epoch
    import stoker
    from seaweedfs import options
    from stoker.cache import StreamingDataset
    t0 = time.perf_counter()
    ds = StreamingDataset("s3://bench/ds", local, max_bytes=0, mode="full", fields=s3_epoch.FIELDS,
                          storage_options=options(endpoint), fetchers=2)
    out = {"constructor": time.perf_counter() - t0}
    marks, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            marks.append((time.perf_counter() - t0, ds.stats()["bytes_downloaded"]))
            time.sleep(0.002)

    poller = threading.Thread(target=poll)
    poller.start()
    batches = []
    for _ in stoker.DataLoader(ds, batch_size=32, num_workers=2):
        batches.append(time.perf_counter() - t0)
    stop.set()
    poller.join()
    total = ds.stats()["bytes_downloaded"]
    out.update(first_shard=next(t for t, b in marks if b > 0), first_batch=batches[0],
               last_shard=next(t for t, b in marks if b == total), last_batch=batches[-1],
               in_flight=ds.stats()["fetch_seconds"], gb=total / 1e9)
    ds.close()
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shards", type=int, default=32)
    ap.add_argument("--shard-mib", type=int, default=16)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    import s3_epoch
    from seaweedfs import SeaweedS3
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        s3_epoch.make_shards(src, a.shards, a.shard_mib)
        names = sorted(n for n in os.listdir(src) if n.endswith(".tar"))
        server = SeaweedS3(os.path.join(tmp, "weed"), buckets=("bench",)).start()
        try:
            server.put_dir("bench/ds", src)
            print("seconds from the constructor's start: constructor, first shard in, first batch, last shard in, "
                  "last batch; seconds with a download in flight; boto3's epoch")
            for r in range(a.rounds):
                os.sync()
                got = subprocess.run([sys.executable, __file__, "--child", server.endpoint, os.path.join(tmp, f"c{r}")],
                                     capture_output=True, text=True, check=True)
                s = json.loads(got.stdout.strip().splitlines()[-1])
                b = subprocess.run([sys.executable, os.path.join(HERE, "s3_epoch.py"), "--child", "boto3",
                                    json.dumps({"endpoint": server.endpoint, "names": names})],
                                   capture_output=True, text=True, check=True)
                boto = json.loads(b.stdout.strip().splitlines()[-1])
                print(f"  round {r}: {s['constructor']:.3f} {s['first_shard']:.3f} {s['first_batch']:.3f} "
                      f"{s['last_shard']:.3f} {s['last_batch']:.3f}; in flight {s['in_flight']:.3f}; "
                      f"boto3 {boto['seconds']:.3f} ({s['gb']:.2f} GB)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
