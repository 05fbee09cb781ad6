"""How long the training loop's own memory mappings wait while the fetchers
back fresh stream buffers (a fresh process's first epoch in full mode from
nginx, bench/http_first_epoch.py's shards and loader).

    python bench/loop_mmap_wait.py [--rounds 4] [--base-site DIR]

A page-populating madvise holds the process's mmap lock for reading for the
length of the call, and an mmap or munmap in any thread (a large tensor's
allocation, a numpy array freed) waits for it.  Per batch, the loop maps
and unmaps 1 MiB four times and times each mmap.  Prints per run the
epoch's seconds, the longest wait, the 99th percentile and how many waited
over 5 ms; with --base-site, another build (pip install --target DIR) in
the same rounds, alternating."""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

CHILD = r"""
import json, mmap, sys, time
import stoker
from stoker.cache import StreamingDataset
url, local = sys.argv[1], sys.argv[2]
ds = StreamingDataset(url, local, max_bytes=0, mode="full", features={"x": ("float32", (1 << 18,))})
waits = []
t0 = time.perf_counter()
for b in stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2):
    for _ in range(4):
        t = time.perf_counter()
        m = mmap.mmap(-1, 1 << 20)
        waits.append(time.perf_counter() - t)
        m.close()
dt = time.perf_counter() - t0
waits.sort()
print(json.dumps({"s": dt, "max_ms": waits[-1] * 1e3, "p99_ms": waits[int(0.99 * len(waits))] * 1e3,
                  "over_5ms": sum(w > 0.005 for w in waits), "n": len(waits)}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    ap.add_argument("--base-site", metavar="DIR", help="another build of stoker (pip install --target DIR)")
    a = ap.parse_args()
    from nginx import Nginx
    from streaming import served_shards
    www = os.path.join(a.dir, "www")
    served_shards(www, 16, 64)
    server = Nginx(os.path.join(a.dir, "nginx"), www).start()
    builds = [("this build", None)] + ([("base build", a.base_site)] if a.base_site else [])
    local = os.path.join(a.dir, "mmap-wait")
    try:
        for r in range(a.rounds):
            for label, site in (builds if r % 2 == 0 else builds[::-1]):
                shutil.rmtree(local, ignore_errors=True)
                env = dict(os.environ, PYTHONPATH=site) if site else None
                out = subprocess.run([sys.executable, "-c", CHILD, server.url, local], capture_output=True,
                                     text=True, check=True, env=env)
                s = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"  round {r} {label}: epoch {s['s']:.3f} s; mmap waits: longest {s['max_ms']:.1f} ms, "
                      f"99th percentile {s['p99_ms']:.2f} ms, {s['over_5ms']} of {s['n']} over 5 ms", flush=True)
    finally:
        server.stop()
        shutil.rmtree(local, ignore_errors=True)


if __name__ == "__main__":
    main()
