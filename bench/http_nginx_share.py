"""How much of the time nginx runs, waits for a CPU, and sleeps while it
serves full mode's epochs, against while it serves curl (issue 29, point 3).

    python bench/http_nginx_share.py [--rounds 3] [--epochs 3] [--dir /var/tmp/stoker-streaming-bench]
                                     [--base-site DIR] [--server-cpu N --client-cpu M]

The shards are bench/http_first_epoch.py's (16 TFRecord shards of 64 MiB,
served by one nginx worker on 127.0.0.1 from the page cache).  Per round:
curl over 2 connections to /dev/null, then one new process that makes a
StreamingDataset (mode="full", max_bytes=0, every other option at its
default) and runs --epochs epochs of stoker.DataLoader(batch_size=8,
shuffle=True, num_workers=2) over it: the first with fresh stream buffers,
the later ones reusing them; curl again after it.  For each: GB/s, / the
mean of curl's two rates around it, the
client's CPU-s per GB, and nginx's shares of the wall time from
/proc/<pid>/schedstat (running, runnable but waiting for a CPU, and the
rest: asleep, waiting for its clients).  curl keeps one nginx worker
running nearly all the time: its rate is the rate of one core of nginx.
With --base-site, another build of stoker (pip install --target DIR) runs
too in each round, which of the two goes first alternating.  Also printed:
the share of each epoch's time each CPU was idle and in interrupts
(/proc/stat, in ticks of 10 ms).  --server-cpu N confines nginx to CPU N and --client-cpu M
confines curl and the stoker process to CPU M: the server with a core of
its own, and what one core of client keeps up with."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

CHILD = r"""
import json, os, shutil, sys, time
import stoker
from stoker.cache import StreamingDataset
url, local, pids, epochs, here = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3].split(",")], int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, here)
from http_nginx_share import run_and_wait, cpu_s
def snap():
    return (*run_and_wait(pids), time.perf_counter(), time.process_time(), cpu_s())
shutil.rmtree(local, ignore_errors=True)
s0 = snap()
ds = StreamingDataset(url, local, max_bytes=0, mode="full", features={"x": ("float32", (1 << 18,))})
loader = stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
out = []
for e in range(epochs):
    n = sum(b["x"].numel() * 4 for b in loader)
    s1 = snap()
    wall = s1[2] - s0[2]
    out.append({"bytes": n, "s": wall, "cpu_s": s1[3] - s0[3], "run": (s1[0] - s0[0]) / wall,
                "wait": (s1[1] - s0[1]) / wall, "cpus": [(b - a) / wall for a, b in zip(s0[4], s1[4])]})
    s0 = snap()
ds.close()
shutil.rmtree(local, ignore_errors=True)
print(json.dumps(out))
"""


def run_and_wait(pids):
    """Seconds these processes have run, and waited to run (runnable, no CPU
    free), so far: /proc/<pid>/schedstat."""
    run = wait = 0.0
    for p in pids:
        with open(f"/proc/{p}/schedstat") as f:
            r, w, _ = f.read().split()
        run, wait = run + int(r) / 1e9, wait + int(w) / 1e9
    return run, wait


def cpu_s():
    """Per CPU, seconds so far idle (idle and iowait) and in interrupts
    (irq and softirq: loopback TCP's receive work among them): /proc/stat,
    in USER_HZ ticks of 10 ms.  [idle of each CPU..., irq of each CPU...]"""
    with open("/proc/stat") as f:
        rows = [line.split() for line in f if line.startswith("cpu") and not line.startswith("cpu ")]
    hz = os.sysconf("SC_CLK_TCK")
    return [(int(v[4]) + int(v[5])) / hz for v in rows] + [(int(v[6]) + int(v[7])) / hz for v in rows]


def per_cpu(shares):
    n = len(shares) // 2
    return "CPUs idle " + "/".join(f"{100 * x:.0f}" for x in shares[:n]) + "%, in interrupts " + \
        "/".join(f"{100 * x:.0f}" for x in shares[n:]) + "%"


def shares(run, wait):
    return f"nginx running {100 * run:3.0f}%, waiting for a CPU {100 * wait:3.0f}%, asleep {100 * (1 - run - wait):3.0f}%"


def curl_run(names, url, pids, gb, label, pre):
    from http_first_epoch import curl_command
    (r0, w0), t0 = run_and_wait(pids), time.perf_counter()
    subprocess.run(pre + curl_command([f"{url}/{n}" for n in names], 2), check=True)
    dt = time.perf_counter() - t0
    r1, w1 = run_and_wait(pids)
    print(f"{label}, 2 connections {gb / dt:.2f} GB/s {shares((r1 - r0) / dt, (w1 - w0) / dt)}")
    return gb / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp/stoker-streaming-bench")
    ap.add_argument("--base-site", metavar="DIR", help="another build of stoker (pip install --target DIR)")
    ap.add_argument("--server-cpu", type=int, help="confine nginx to this CPU")
    ap.add_argument("--client-cpu", type=int, help="confine curl and the stoker process to this CPU")
    a = ap.parse_args()
    from nginx import Nginx
    from streaming import served_shards
    from stoker._procfs import tree_pids
    names, total = served_shards(os.path.join(a.dir, "www"), 16, 64)
    server = Nginx(os.path.join(a.dir, "nginx"), os.path.join(a.dir, "www")).start()
    pids = tree_pids(server.proc.pid)
    if a.server_cpu is not None:
        for p in pids:
            os.sched_setaffinity(p, {a.server_cpu})
    pre = ["taskset", "-c", str(a.client_cpu)] if a.client_cpu is not None else []
    gb = total / 1e9

    builds = [("stoker", None)] + ([("base", a.base_site)] if a.base_site else [])
    ratios = {}
    try:
        for r in range(a.rounds):
            before = curl_run(names, server.url, pids, gb, f"round {r}: curl before", pre)
            got = {}
            for label, site in (builds if r % 2 == 0 else builds[::-1]):
                env = dict(os.environ, PYTHONPATH=site) if site else None
                got[label] = subprocess.run(pre + [sys.executable, "-c", CHILD, server.url, os.path.join(a.dir, "share"),
                                             ",".join(map(str, pids)), str(a.epochs), HERE],
                                            capture_output=True, text=True, check=True, env=env)
            curl = (before + curl_run(names, server.url, pids, gb, "         curl after ", pre)) / 2
            for label, _ in builds:
                for e, x in enumerate(json.loads(got[label].stdout.strip().splitlines()[-1])):
                    assert x["bytes"] == 16 * 64 << 20, x
                    rate = gb / x["s"]
                    ratios.setdefault((label, e), []).append(rate / curl)
                    print(f"         {label}, epoch {e}{' (fresh)' if e == 0 else '        '} {rate:.2f} GB/s "
                          f"{rate / curl:.2f}x, client {x['cpu_s'] / gb:.2f} CPU-s/GB; {shares(x['run'], x['wait'])}; "
                          f"{per_cpu(x['cpus'])}",
                          flush=True)
    finally:
        server.stop()
    for (label, e), v in ratios.items():
        print(f"{label}, epoch {e}: median {statistics.median(v):.2f}x curl (per round "
              f"{' '.join(f'{x:.2f}' for x in sorted(v))}, sorted)")


if __name__ == "__main__":
    main()
