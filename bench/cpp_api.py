"""The C++ API against the Python native path, same run.

    ninja -C build stoker_cpp_loader_bench      # (the dev build, see README)
    .venv/bin/python bench/cpp_api.py --gb 2

1. Throughput: 4 MiB float32 records of a raw file in the page cache, batch 8,
   2 reader threads, shuffled: stoker::Loader in a C++ program
   (bench/cpp_loader.cc) against stoker.DataLoader(stoker.io.RawDataset(...))
   in Python, alternating three times each.
2. Per-batch overhead: batches of 64 samples of 64 bytes from an in-memory
   C++ dataset through stoker::Loader (1 and 2 threads), next to a plain loop
   doing the same 64 copies per batch: ns per batch.
Prints a table and, last, a JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import stoker
from native_read import RECORD, raw_file, warm  # bench/ is on sys.path when run as a script
from stoker import io

HERE = os.path.dirname(os.path.abspath(__file__))


def python_rate(path, seconds):
    loader = stoker.DataLoader(io.RawDataset(path, "float32", (RECORD,)), batch_size=8, shuffle=True,
                               num_workers=2, persistent_workers=True)
    nbytes, t0 = 0, time.perf_counter()
    while True:
        for b in loader:
            nbytes += b.numel() * 4
            if time.perf_counter() - t0 >= seconds:
                return nbytes / (time.perf_counter() - t0) / 1e9


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gb", type=float, default=2.0)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--dir", default="/var/tmp")
    p.add_argument("--binary", default=os.path.join(HERE, "..", "build", "stoker_cpp_loader_bench"))
    a = p.parse_args(argv)
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} is missing: build it (ninja -C build stoker_cpp_loader_bench)")
    n, path = raw_file(a.gb, a.dir)
    warm(path)
    py, cpp = [], []
    for _ in range(3):
        py.append(python_rate(path, a.seconds))
        r = subprocess.run([a.binary, "throughput", path, str(RECORD * 4), str(a.seconds)],
                           capture_output=True, text=True, check=True)
        cpp.append(json.loads(r.stdout)["cpp_loader_gb_per_s"])
    r = subprocess.run([a.binary, "overhead", str(a.seconds)], capture_output=True, text=True, check=True)
    ovh = json.loads(r.stdout)
    out = {"python_native_gb_per_s": py, "cpp_loader_gb_per_s": cpp,
           "cpp_over_python_median": statistics.median(cpp) / statistics.median(py), **ovh}
    print(f"{n} records of 4 MiB in the page cache, batch 8, 2 threads (three runs each, alternating)")
    print(f"  stoker.DataLoader (Python) {', '.join(f'{x:.2f}' for x in py)} GB/s")
    print(f"  stoker::Loader (C++)       {', '.join(f'{x:.2f}' for x in cpp)} GB/s  "
          f"(median {out['cpp_over_python_median']:.2f}x Python)")
    print("batches of 64 samples x 64 bytes, in-memory dataset:")
    print(f"  stoker::Loader, 1 thread   {ovh['loader_1_threads_ns_per_batch']:8.0f} ns/batch")
    print(f"  stoker::Loader, 2 threads  {ovh['loader_2_threads_ns_per_batch']:8.0f} ns/batch")
    print(f"  plain loop, same copies    {ovh['plain_loop_ns_per_batch']:8.0f} ns/batch")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
