"""bench/s3_timeline.py's question for full mode from nginx (issue 29,
point 3): in bench/http_first_epoch.py's epoch (16 TFRecord shards of 64 MiB,
shuffled, batches of 8, 2 reader threads, every option at its default, a
fresh process), when does the last shard arrive, and when the last batch?

    python bench/http_timeline.py [--rounds 4] [--dir /var/tmp/stoker-streaming-bench]

Then curl with 2 connections over the same files, to /dev/null.  Prints, in
seconds from the constructor's start: first shard in, first batch, last
shard in, last batch, and the seconds with a download in flight."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

CHILD = r"""
import json, sys, threading, time
import stoker
from stoker.cache import StreamingDataset
url, local = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
ds = StreamingDataset(url, local, max_bytes=0, mode="full", features={"x": ("float32", (1 << 18,))})
marks, stop = [], threading.Event()
def poll():  # bytes_downloaded counts whole shards
    while not stop.is_set():
        marks.append((time.perf_counter() - t0, ds.stats()["bytes_downloaded"]))
        time.sleep(0.002)
poller = threading.Thread(target=poll)
poller.start()
batches = [time.perf_counter() - t0 for _ in stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)]
stop.set()
poller.join()
total = ds.stats()["bytes_downloaded"]
print(json.dumps({"first_shard": next(t for t, b in marks if b > 0), "first_batch": batches[0],
                  "last_shard": next(t for t, b in marks if b == total), "last_batch": batches[-1],
                  "in_flight": ds.stats()["fetch_seconds"]}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    a = ap.parse_args()
    from nginx import Nginx
    from streaming import served_shards
    www = os.path.join(a.dir, "www")
    names, _ = served_shards(www, 16, 64)
    server = Nginx(os.path.join(a.dir, "nginx"), www).start()
    try:
        print("seconds from the constructor's start: first shard in, first batch, last shard in, last batch; "
              "seconds with a download in flight; curl's 2 connections")
        for r in range(a.rounds):
            local = os.path.join(a.dir, f"timeline{r}")
            got = subprocess.run([sys.executable, "-c", CHILD, server.url, local], capture_output=True, text=True,
                                 check=True)
            s = json.loads(got.stdout.strip().splitlines()[-1])
            cmd = ["curl", "-s", "--no-progress-meter", "--fail", "--parallel", "--parallel-max", "2"]
            for n in names:
                cmd += ["-o", "/dev/null", f"{server.url}/{n}"]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            curl = time.perf_counter() - t0
            print(f"  round {r}: {s['first_shard']:.3f} {s['first_batch']:.3f} {s['last_shard']:.3f} "
                  f"{s['last_batch']:.3f}; in flight {s['in_flight']:.3f}; curl {curl:.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
