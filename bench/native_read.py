"""The native read path against memcpy and torch's DataLoader.

    python bench/native_read.py --gb 2

A raw file of 4 MiB float32 records (--gb of them, in the page cache: read
once first), loaded in batches of 8 for --seconds:
  stoker: stoker.DataLoader(stoker.io.RawDataset(...), num_workers=2): two
          C++ threads pread records straight into the slot pool;
  torch:  torch.utils.data.DataLoader over a dataset that reads each record
          with numpy (np.fromfile at its offset), 2 worker processes.
Also single-core memcpy bandwidth (same run) and how fast a Python thread in
the main process runs while stoker loads, against idle.  With --cold (root:
it drops the page cache), one sequential stoker epoch from disk against
`dd` reading the same file.  Prints a table and, last, a JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch

import stoker
from stoker import io
from stoker.bench import memcpy_bandwidth, spin_rate

RECORD = 1 << 20  # float32 elements: 4 MiB


class NumpyRaw(torch.utils.data.Dataset):
    """What a user writes for torch: read record i with numpy."""

    def __init__(self, path, n):
        self.path, self.n = path, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.from_numpy(np.fromfile(self.path, dtype=np.float32, count=RECORD, offset=i * RECORD * 4))


def rate(loader, seconds):
    nbytes, t0 = 0, time.perf_counter()
    while True:
        for b in loader:
            nbytes += b.numel() * b.element_size()
            if time.perf_counter() - t0 >= seconds:
                return nbytes / (time.perf_counter() - t0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gb", type=float, default=2.0)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--cold", action="store_true", help="also measure from disk (drops the page cache)")
    a = p.parse_args(argv)
    n = int(a.gb * (1 << 30)) // (RECORD * 4)
    path = os.path.join(a.dir, f"stoker_native_read_{n}.bin")
    if not os.path.exists(path) or os.path.getsize(path) != n * RECORD * 4:
        rec = np.random.default_rng(0).standard_normal(RECORD, dtype=np.float32)
        with open(path, "wb") as f:
            for _ in range(n):
                f.write(rec.tobytes())
    with open(path, "rb") as f:  # warm the page cache
        while f.read(64 << 20):
            pass
    memcpy = memcpy_bandwidth()
    ours = stoker.DataLoader(io.RawDataset(path, "float32", (RECORD,)), batch_size=8, shuffle=True, num_workers=2,
                             persistent_workers=True)
    theirs = torch.utils.data.DataLoader(NumpyRaw(path, n), batch_size=8, shuffle=True, num_workers=2,
                                         persistent_workers=True)
    stoker_bps = rate(ours, a.seconds)
    torch_bps = rate(theirs, a.seconds)
    idle = spin_rate(2.0)
    busy = spin_rate(2.0, lambda: rate(ours, 0.25))
    out = {"records": n, "file_gb": n * RECORD * 4 / 1e9, "memcpy_gb_per_s": memcpy / 1e9,
           "stoker_gb_per_s": stoker_bps / 1e9, "torch_gb_per_s": torch_bps / 1e9,
           "stoker_over_memcpy": stoker_bps / memcpy, "stoker_over_torch": stoker_bps / torch_bps,
           "python_thread_rate_while_loading": busy / idle}
    print(f"{n} records of 4 MiB ({out['file_gb']:.1f} GB, page cache), batch 8, 2 threads / 2 workers")
    print(f"  single-core memcpy             {out['memcpy_gb_per_s']:6.2f} GB/s")
    print(f"  stoker RawDataset              {out['stoker_gb_per_s']:6.2f} GB/s  "
          f"{out['stoker_over_memcpy']:.2f}x memcpy, {out['stoker_over_torch']:.1f}x torch")
    print(f"  torch DataLoader + np.fromfile {out['torch_gb_per_s']:6.2f} GB/s")
    print(f"  a Python thread while stoker loads: {100 * out['python_thread_rate_while_loading']:.0f}% of its idle rate")
    if a.cold:
        out.update(cold(path, n))
        print(f"  cold cache: dd {out['dd_gb_per_s']:.2f} GB/s, stoker sequential epoch "
              f"{out['cold_stoker_gb_per_s']:.2f} GB/s ({out['cold_stoker_over_dd']:.2f}x dd)")
    print(json.dumps(out))
    return 0


def drop_page_cache():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cold(path, n):
    import subprocess
    drop_page_cache()
    t = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M"], check=True, capture_output=True)
    dd = os.path.getsize(path) / (time.perf_counter() - t)
    drop_page_cache()
    loader = stoker.DataLoader(io.RawDataset(path, "float32", (RECORD,)), batch_size=8, num_workers=2)
    t = time.perf_counter()
    nbytes = sum(b.numel() * 4 for b in loader)
    ours = nbytes / (time.perf_counter() - t)
    return {"dd_gb_per_s": dd / 1e9, "cold_stoker_gb_per_s": ours / 1e9, "cold_stoker_over_dd": ours / dd}


if __name__ == "__main__":
    sys.exit(main())
