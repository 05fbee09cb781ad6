"""bench/s3_timeline.py's question for full mode from nginx (issue 29,
point 3): in bench/http_first_epoch.py's epoch (16 TFRecord shards of 64 MiB,
shuffled, batches of 8, 2 reader threads, every option at its default, a
fresh process), when does the last shard arrive, and when the last batch?
And where does the process's CPU go?

    python bench/http_timeline.py [--rounds 4] [--dir /var/tmp/stoker-streaming-bench]

Then curl with 2 connections over the same files, to /dev/null.  Prints, in
seconds from the constructor's start: first shard in, first batch, last
shard in, last batch, and the seconds with a download in flight; then the
CPU-seconds of the process's threads by name (/proc/self/task/*/schedstat,
looked at every 10 ms: a thread's last 10 ms before it ends can be missed;
"python" is the loop's thread and this bench's poller), nginx's, and curl's."""
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
import json, os, sys, threading, time
import stoker
from stoker.cache import StreamingDataset
c0 = {t: int(open(f"/proc/self/task/{t}/schedstat").read().split()[0]) / 1e9 for t in os.listdir("/proc/self/task")}
url, local = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
ds = StreamingDataset(url, local, max_bytes=0, mode="full", features={"x": ("float32", (1 << 18,))})
marks, stop, cpu = [], threading.Event(), {}
def threads():  # tid -> (name, CPU-seconds so far)
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f, open(f"/proc/self/task/{tid}/schedstat") as g:
                cpu[tid] = (f.read().strip(), int(g.read().split()[0]) / 1e9)
        except OSError:
            pass
def poll():  # bytes_downloaded counts whole shards
    n = 0
    while not stop.is_set():
        marks.append((time.perf_counter() - t0, ds.stats()["bytes_downloaded"]))
        if n % 5 == 0:
            threads()
        n += 1
        time.sleep(0.002)
poller = threading.Thread(target=poll)
poller.start()
batches = [time.perf_counter() - t0 for _ in stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)]
stop.set()
poller.join()
threads()
by_name = {}
for tid, (name, s) in cpu.items():
    by_name[name] = by_name.get(name, 0.0) + s - c0.get(tid, 0.0)
total = ds.stats()["bytes_downloaded"]
print(json.dumps({"first_shard": next(t for t, b in marks if b > 0), "first_batch": batches[0],
                  "last_shard": next(t for t, b in marks if b == total), "last_batch": batches[-1],
                  "in_flight": ds.stats()["fetch_seconds"], "cpu": by_name}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    a = ap.parse_args()
    from nginx import Nginx
    from streaming import served_shards
    from stoker._procfs import tree_pids
    from http_first_epoch import cpu_of, curl_command
    www = os.path.join(a.dir, "www")
    names, _ = served_shards(www, 16, 64)
    server = Nginx(os.path.join(a.dir, "nginx"), www).start()
    nginx = tree_pids(server.proc.pid)
    try:
        print("seconds from the constructor's start: first shard in, first batch, last shard in, last batch; "
              "seconds with a download in flight; curl's 2 connections")
        for r in range(a.rounds):
            local = os.path.join(a.dir, f"timeline{r}")
            n0 = cpu_of(nginx)
            got = subprocess.run([sys.executable, "-c", CHILD, server.url, local], capture_output=True, text=True,
                                 check=True)
            s = json.loads(got.stdout.strip().splitlines()[-1])
            n1 = cpu_of(nginx)
            t0, c0 = time.perf_counter(), os.times()
            subprocess.run(curl_command([f"{server.url}/{n}" for n in names], 2), check=True)
            curl, c1 = time.perf_counter() - t0, os.times()
            curl_cpu = c1.children_user + c1.children_system - c0.children_user - c0.children_system
            print(f"  round {r}: {s['first_shard']:.3f} {s['first_batch']:.3f} {s['last_shard']:.3f} "
                  f"{s['last_batch']:.3f}; in flight {s['in_flight']:.3f}; curl {curl:.3f}")
            print("    CPU-s: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(s["cpu"].items(), key=lambda kv: -kv[1])
                                        if v >= 0.001) +
                  f"; nginx {n1 - n0:.3f} (curl's run: {cpu_of(nginx) - n1:.3f}); curl {curl_cpu:.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
