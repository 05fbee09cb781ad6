"""The native read path against memcpy and torch's DataLoader.

    python bench/native_read.py --gb 2

A raw file and a TFRecord file of 4 MiB float32 records (--gb of each, in
the page cache: read once first), loaded in batches of 8 for --seconds:
  stoker raw:      stoker.DataLoader(stoker.io.RawDataset(...), num_workers=2):
                   two C++ threads pread records straight into the slot pool;
  stoker tfrecord: stoker.io.TFRecordDataset(..., features={"x": ("float32",
                   (1048576,))}), 2 threads: both CRCs checked, the Example
                   decoded into the slot (io="mmap", the default, and "pread");
  torch:           torch.utils.data.DataLoader over a dataset that reads each
                   raw record with numpy (np.fromfile at its offset), 2 workers.
Also single-core memcpy bandwidth (same run) and how fast a Python thread in
the main process runs while stoker loads each format, against idle.  With
--cold (root: it drops the page cache), one sequential stoker epoch from disk
per format and io mode (pread, direct) against `dd` reading the same file.
Prints a table and, last, a JSON line.
"""
from __future__ import annotations

import argparse
import gc
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
    """What a user writes for torch: read record i (`record` float32) with numpy."""

    def __init__(self, path, n, record=RECORD):
        self.path, self.n, self.record = path, n, record

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.from_numpy(np.fromfile(self.path, dtype=np.float32, count=self.record,
                                            offset=i * self.record * 4))


def nbytes_of(b):
    if isinstance(b, dict):
        return sum(nbytes_of(v) for v in b.values())
    return b.numel() * b.element_size()


def rate(loader, seconds):
    nbytes, t0 = 0, time.perf_counter()
    while True:
        for b in loader:
            nbytes += nbytes_of(b)
            if time.perf_counter() - t0 >= seconds:
                return nbytes / (time.perf_counter() - t0)


def python_thread_rate(loader, seconds, idle):
    """A Python thread's loop rate while this thread takes batches from
    `loader` one after another, epoch after epoch (a training loop with no
    model), against `idle` (its rate while this thread sleeps, no loader
    alive); and the GB/s loaded meanwhile."""
    def forever():
        while True:
            yield from loader
    batches, total = forever(), [0]

    def work():
        total[0] += nbytes_of(next(batches))
    t = time.perf_counter()
    busy = spin_rate(seconds, work)
    return busy / idle, total[0] / (time.perf_counter() - t)


def raw_file(gb, directory):
    """(records, path) of a raw file of `gb` GB of 4 MiB float32 records,
    written once and kept for later runs."""
    n = int(gb * (1 << 30)) // (RECORD * 4)
    path = os.path.join(directory, f"stoker_native_read_{n}.bin")
    if not os.path.exists(path) or os.path.getsize(path) != n * RECORD * 4:
        rec = np.random.default_rng(0).standard_normal(RECORD, dtype=np.float32)
        with open(path, "wb") as f:
            for _ in range(n):
                f.write(rec.tobytes())
    return n, path


def warm(path):
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def tfrecord_file(raw_path, n, directory):
    path = os.path.join(directory, f"stoker_native_read_{n}.tfrecord")
    if not os.path.exists(path):
        rec = np.fromfile(raw_path, dtype=np.float32, count=RECORD)
        io.write_tfrecord(path, ({"x": rec} for _ in range(n)))
    return path


FEATURES = {"x": ("float32", (RECORD,))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gb", type=float, default=2.0)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--cold", action="store_true", help="also measure from disk (drops the page cache)")
    a = p.parse_args(argv)
    n, path = raw_file(a.gb, a.dir)
    tfr = tfrecord_file(path, n, a.dir)
    io.TFRecordDataset(tfr, FEATURES)  # index it once, outside the timing
    memcpy = memcpy_bandwidth()
    def loader(ds, priority="normal"):
        return stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2, persistent_workers=True,
                                 reader_priority=priority)
    datasets = {"raw": io.RawDataset(path, "float32", (RECORD,)),
                "tfrecord": io.TFRecordDataset(tfr, FEATURES),
                "tfrecord_pread": io.TFRecordDataset(tfr, FEATURES, io="pread")}
    theirs = torch.utils.data.DataLoader(NumpyRaw(path, n), batch_size=8, shuffle=True, num_workers=2,
                                         persistent_workers=True)
    out = {"records": n, "file_gb": n * RECORD * 4 / 1e9, "memcpy_gb_per_s": memcpy / 1e9}
    idle = spin_rate(a.seconds)  # before any loader exists
    warm(path)
    torch_bps = rate(theirs, a.seconds)
    out["torch_gb_per_s"] = torch_bps / 1e9
    for name, ds in datasets.items():
        warm(tfr if name.startswith("tfrecord") else path)
        ours = loader(ds)
        bps = rate(ours, a.seconds)
        out.update({f"{name}_gb_per_s": bps / 1e9, f"{name}_over_memcpy": bps / memcpy,
                    f"{name}_over_torch": bps / torch_bps})
        for priority in ("normal", "idle"):
            r, loaded = python_thread_rate(loader(ds, priority), a.seconds, idle)
            out[f"{name}_python_thread_rate_{priority}"] = r
            out[f"{name}_gb_per_s_beside_python_thread_{priority}"] = loaded / 1e9
            gc.collect()  # the loader and its threads go before the next measurement
        del ours
        gc.collect()
    print(f"{n} records of 4 MiB ({out['file_gb']:.1f} GB per file, page cache), batch 8, 2 threads / 2 workers")
    print(f"  single-core memcpy                {out['memcpy_gb_per_s']:6.2f} GB/s")
    for name, label in (("raw", "stoker RawDataset"), ("tfrecord", "stoker TFRecordDataset"),
                        ("tfrecord_pread", "stoker TFRecordDataset io=pread")):
        print(f"  {label:33s} {out[name + '_gb_per_s']:6.2f} GB/s  {out[name + '_over_memcpy']:.2f}x memcpy, "
              f"{out[name + '_over_torch']:.1f}x torch")
        for pr in ("normal", "idle"):
            print(f"      Python thread beside it, reader_priority={pr!r}: "
                  f"{100 * out[f'{name}_python_thread_rate_{pr}']:.0f}% of its idle rate "
                  f"(loading {out[f'{name}_gb_per_s_beside_python_thread_{pr}']:.1f} GB/s meanwhile)")
    print(f"  torch DataLoader + np.fromfile    {out['torch_gb_per_s']:6.2f} GB/s")
    if a.cold:
        out.update(cold(path, tfr))
        print(f"  cold cache: dd {out['dd_gb_per_s']:.2f} GB/s; one sequential epoch:")
        for k in ("raw_pread", "raw_mmap", "raw_direct", "tfrecord_pread", "tfrecord_mmap", "tfrecord_direct"):
            print(f"    {k:16s} {out['cold_' + k + '_gb_per_s']:.2f} GB/s ({out['cold_' + k + '_over_dd']:.2f}x dd)")
    print(json.dumps(out))
    return 0


def drop_page_cache():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cold(path, tfr):
    import subprocess
    drop_page_cache()
    t = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M"], check=True, capture_output=True)
    dd = os.path.getsize(path) / (time.perf_counter() - t)
    out = {"dd_gb_per_s": dd / 1e9}
    for name, make in (("raw", lambda m: io.RawDataset(path, "float32", (RECORD,), io=m)),
                       ("tfrecord", lambda m: io.TFRecordDataset(tfr, FEATURES, io=m))):
        for mode in ("pread", "mmap", "direct"):
            ds = make(mode)
            drop_page_cache()
            loader = stoker.DataLoader(ds, batch_size=8, num_workers=2)
            t = time.perf_counter()
            nbytes = sum(nbytes_of(b) for b in loader)
            bps = nbytes / (time.perf_counter() - t)
            out[f"cold_{name}_{mode}_gb_per_s"] = bps / 1e9
            out[f"cold_{name}_{mode}_over_dd"] = bps / dd
    return out


if __name__ == "__main__":
    sys.exit(main())
