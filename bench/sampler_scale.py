"""shuffle=True at scale: torch.utils.data.DataLoader against stoker.DataLoader
on a map-style dataset whose __getitem__ returns the index, batch 256, 2
workers, in the same run.

    python bench/sampler_scale.py                      # 10^6, 10^7, 10^8; 8 ranks; scalable 10^9, 10^10
    python bench/sampler_scale.py --sizes 1e6,1e7 --ranks 0 --scalable ''

Per size, each loader in a fresh process: the time from iter() to the first
batch, the main process's RSS growth (after the first batch, and after the
batches timed), samples/s over the next --batches batches, and the CPU
seconds of drawing one epoch's order (torch: randperm + tolist, as
RandomSampler does; stoker: the native randperm, to its last draw).  With
--ranks R: R processes of one node at once, each rank's DistributedSampler
part (torch's, and stoker's distributed=True), their summed RSS growth and
slowest first batch.  --scalable: shuffle="scalable" at sizes torch cannot
start (its randperm alone needs 8 bytes a sample, and the list ~36 more).
Prints a table, then one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


class Indices:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def one(kind: str, n: int, batches: int, rank: int, world: int) -> dict:
    import torch
    import stoker
    from torch.utils.data import DistributedSampler
    torch.manual_seed(0)
    ds = Indices(n)
    base = rss()
    t0 = time.perf_counter()
    if kind == "torch":
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True) if world > 1 else None
        loader = torch.utils.data.DataLoader(ds, batch_size=256, shuffle=sampler is None, sampler=sampler,
                                             num_workers=2)
    elif kind == "stoker":
        if world > 1:
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
        loader = stoker.DataLoader(ds, batch_size=256, shuffle=True, num_workers=2, distributed=world > 1)
    else:
        loader = stoker.DataLoader(ds, batch_size=256, shuffle="scalable", num_workers=2)
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    grown_first = rss() - base
    t1 = time.perf_counter()
    for _ in range(batches):
        next(it)
    rate = batches * 256 / (time.perf_counter() - t1)
    grown = max(grown_first, rss() - base)
    del it, loader
    return {"first_batch_ms": 1000 * first, "rss_growth_mib_first": grown_first / 2**20,
            "rss_growth_mib": grown / 2**20, "samples_per_s": rate}


def order_cpu(kind: str, n: int) -> float:
    """CPU seconds to draw one epoch's order (every thread of the process)."""
    import torch
    g = torch.Generator().manual_seed(1)
    t = time.process_time()
    if kind == "torch":
        torch.randperm(n, generator=g).tolist()
    else:
        from stoker import _native as N, _sampling
        N.lib.torch_randperm(n, n, *_sampling._mt_of(g), 0).final_generator_state()
    return time.process_time() - t


def child(args) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", args], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def ranks_of_a_node(kind: str, n: int, world: int, batches: int) -> dict:
    procs = [subprocess.Popen([sys.executable, __file__, "--child", f"{kind},{n},{batches},{r},{world}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    rows = []
    for p in procs:
        o, e = p.communicate(timeout=3600)
        if p.returncode != 0:
            return {"error": e.strip().splitlines()[-1] if e.strip() else f"exit {p.returncode}"}
        rows.append(json.loads(o.strip().splitlines()[-1]))
    return {"first_batch_ms_max": max(r["first_batch_ms"] for r in rows),
            "rss_growth_mib_sum": sum(r["rss_growth_mib"] for r in rows)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rank-sizes", default="1e7,1e8")
    ap.add_argument("--scalable", default="1e9,1e10")
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        parts = a.child.split(",")
        if parts[0] == "cpu":
            print(json.dumps({"cpu_s": order_cpu(parts[1], int(parts[2]))}))
        else:
            kind, n, batches, rank, world = parts[0], int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])
            print(json.dumps(one(kind, n, batches, rank, world)))
        return
    sizes = [int(float(x)) for x in a.sizes.split(",") if x]
    report = {"single": {}, "ranks": {}, "scalable": {}}
    print(f"{'samples':>14} {'loader':>7} {'first batch':>12} {'RSS growth':>22} {'samples/s':>11} {'order CPU':>10}")
    for n in sizes:
        for kind in ("torch", "stoker"):
            r = child(f"{kind},{n},{a.batches},0,1")
            r.update(child(f"cpu,{kind},{n}"))
            report["single"][f"{kind}/{n}"] = r
            if "error" in r:
                print(f"{n:>14,} {kind:>7} error: {r['error']}")
                continue
            print(f"{n:>14,} {kind:>7} {r['first_batch_ms']:>9,.0f} ms "
                  f"{r['rss_growth_mib_first']:>8,.0f} / {r['rss_growth_mib']:>6,.0f} MiB "
                  f"{r['samples_per_s']:>11,.0f} {r['cpu_s']:>8.2f} s")
    if a.ranks > 1:
        print(f"\n{a.ranks} ranks of one node (each its DistributedSampler part):")
        for n in [int(float(x)) for x in a.rank_sizes.split(",") if x]:
            for kind in ("torch", "stoker"):
                need = n * 44 * a.ranks  # randperm's int64 tensor and the list of Python ints, per rank
                if kind == "torch" and need > 0.8 * available():
                    report["ranks"][f"{kind}/{n}"] = {"skipped": f"needs ~{need / 2**30:.0f} GiB"}
                    print(f"{n:>14,} {kind:>7} cannot run here: {a.ranks} ranks need ~{need / 2**30:.0f} GiB at once "
                          f"(randperm + the list of every index, per rank); {available() / 2**30:.0f} GiB available")
                    continue
                r = ranks_of_a_node(kind, n, a.ranks, a.batches // 4)
                report["ranks"][f"{kind}/{n}"] = r
                if "error" in r:
                    print(f"{n:>14,} {kind:>7} error: {r['error']}")
                    continue
                print(f"{n:>14,} {kind:>7} slowest first batch {r['first_batch_ms_max']:>8,.0f} ms, "
                      f"RSS growth of all ranks {r['rss_growth_mib_sum']:>8,.0f} MiB")
    for n in [int(float(x)) for x in a.scalable.split(",") if x]:
        r = child(f"scalable,{n},{a.batches},0,1")
        report["scalable"][str(n)] = r
        if "error" in r:
            print(f"{n:>14,} scalable error: {r['error']}")
            continue
        print(f"{n:>14,} stoker shuffle='scalable': first batch {r['first_batch_ms']:,.0f} ms, RSS growth "
              f"{r['rss_growth_mib']:,.0f} MiB, {r['samples_per_s']:,.0f} samples/s "
              f"(torch cannot start: randperm alone needs {n * 8 / 2**30:,.0f} GiB)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
