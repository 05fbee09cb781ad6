"""Parquet to torch batches: stoker.io.ParquetDataset (sequential and
shuffled) against pyarrow's own scanner and torch's DataLoader over
read_row_group, in the same run, on files this script writes.

Columns as issue 51 lists them: id int64, label int32, emb
fixed_size_list<float32>[256], text (~200 B), img binary (1-4 KB).  Every
loader turns each batch into what a training loop takes: tensors for the
numbers, lists of str and bytes for text and img (or, with --strings
offsets, their bytes + offsets as tensors).  Rows/s, warm page cache.

    python bench/parquet.py --files 8 --groups 8 --rows 2048 [--cold] [--max-memory BYTES] [--mix W]
                            [--strings offsets]

--mix W adds a stoker.Mix of the files, each file a ParquetDataset source
(shuffle_window=W) weighted by its rows, shuffled: each source by windows of
its row groups.

--cold drops the files from the page cache before each run
(posix_fadvise DONTNEED), so that every loader reads them from the disk.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import warnings
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import torch

import stoker
import stoker.io


def write(d: str, files: int, groups: int, rows: int) -> int:
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(5000)])
    first = 0
    for f in range(files):
        n = groups * rows
        text = [" ".join(rng.choice(words, 40)) for _ in range(n)]
        img = [rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in rng.integers(1024, 4097, n)]
        t = pa.table({
            "id": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "label": pa.array(rng.integers(0, 1000, n).astype(np.int32)),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 256).astype(np.float32)), 256),
            "text": pa.array(text),
            "img": pa.array(img, pa.binary()),
        })
        pq.write_table(t, os.path.join(d, f"part-{f:03d}.parquet"), row_group_size=rows, compression="zstd")
        first += n
    return first


def prepared(d: str, files: int, groups: int, rows: int) -> int:
    """The rows of the files in d: written there if d is empty (made if
    missing), else read as they are (--data: the full size takes minutes to
    write), checked against files x groups x rows."""
    os.makedirs(d, exist_ok=True)
    if not os.listdir(d):
        return write(d, files, groups, rows)
    n = sum(pq.ParquetFile(os.path.join(d, f)).metadata.num_rows for f in os.listdir(d))
    assert n == files * groups * rows, f"{d} holds {n} rows, not --files x --groups x --rows"
    return n


STRINGS = "objects"  # --strings: text and img as lists of str and bytes, or as bytes + offsets


def bytes_offsets(a) -> dict:
    """A string or binary Arrow array as {"values", "offsets"} tensors over
    its own buffers (no copy; the offsets Arrow's int32, into its buffer)."""
    _valid, offsets, values = a.buffers()
    o = np.frombuffer(offsets, np.int32)[a.offset:a.offset + len(a) + 1]
    return {"values": torch.frombuffer(values, dtype=torch.uint8) if values is not None and values.size
            else torch.empty(0, dtype=torch.uint8), "offsets": torch.from_numpy(o)}


def to_torch(rb) -> dict:
    emb = rb.column("emb")  # (from_numpy of Arrow's read-only buffers: no copy)
    out = {"id": torch.from_numpy(rb.column("id").to_numpy()),
           "label": torch.from_numpy(rb.column("label").to_numpy()),
           "emb": torch.from_numpy(emb.flatten().to_numpy().reshape(len(rb), 256))}
    for c in ("text", "img"):
        out[c] = rb.column(c).to_pylist() if STRINGS == "objects" else bytes_offsets(rb.column(c))
    return out


class RowGroups(torch.utils.data.Dataset):
    """torch's DataLoader over pq.ParquetFile.read_row_group: an item is a row group."""

    def __init__(self, paths):
        self.paths = paths
        self.groups = [(p, g) for p in paths for g in range(pq.ParquetFile(p).num_row_groups)]

    def __len__(self):
        return len(self.groups)

    def __getitem__(self, i):
        p, g = self.groups[i]
        t = pq.ParquetFile(p).read_row_group(g)
        return to_torch(t.combine_chunks().to_batches()[0])


def evict(paths) -> None:
    """The files' pages out of the page cache (a cold read follows)."""
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(it, total_rows) -> float:
    t0 = time.perf_counter()
    rows = 0
    for b in it:
        rows += len(b["id"])
    dt = time.perf_counter() - t0
    assert rows == total_rows, (rows, total_rows)
    # The loader's threads and processes go before the next one is timed
    # (a peer's prefetch threads left running would slow the next loader).
    del it, b
    gc.collect()
    time.sleep(1.0)
    return rows / dt


def main():
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="each run reads the files out of the page cache")
    ap.add_argument("--max-memory", type=int, default=None,
                    help="stoker's max_memory (default: its own); a shuffled epoch's window of row groups is in it")
    ap.add_argument("--data", default=None,
                    help="a directory for the files, kept: written if empty, else read as it is (the full size takes "
                         "minutes to write)")
    ap.add_argument("--mix", type=int, default=0, metavar="W",
                    help="also a shuffled stoker.Mix of the files as sources, each with shuffle_window=W")
    ap.add_argument("--strings", choices=["objects", "offsets"], default="objects",
                    help="text and img as lists of str and bytes (objects), or as uint8 bytes + offsets tensors in "
                         "every loader (stoker's strings='offsets'; pyarrow's and torch's over Arrow's buffers)")
    a = ap.parse_args()
    global STRINGS
    STRINGS = a.strings
    pds = lambda p, **kw: stoker.io.ParquetDataset(p, strings=a.strings, **kw)  # noqa: E731
    with (contextlib.nullcontext(a.data) if a.data else
          tempfile.TemporaryDirectory(dir=os.environ.get("STOKER_BENCH_DIR"))) as d:
        n = prepared(d, a.files, a.groups, a.rows)
        paths = sorted(os.path.join(d, f) for f in os.listdir(d))
        size = sum(os.path.getsize(p) for p in paths)
        print(f"{a.files} files x {a.groups} row groups x {a.rows} rows = {n} rows, {size / 2**20:.0f} MiB (zstd), "
              f"{'cold' if a.cold else 'warm'} page cache, strings as {a.strings}")
        # (a new dataset for each run: nothing decoded by an earlier run is kept)
        runs = {
            "pyarrow to_batches(use_threads=True) + from_numpy":
                lambda: (to_torch(rb) for rb in pads.dataset(paths).to_batches(batch_size=a.batch, use_threads=True)),
            "torch DataLoader over read_row_group (2 workers)":
                lambda: torch.utils.data.DataLoader(RowGroups(paths), batch_size=None, num_workers=2),
            "stoker ParquetDataset, sequential (2 threads)":
                lambda: stoker.DataLoader(pds(paths), batch_size=a.batch, num_workers=2,
                                          max_memory=a.max_memory),
            "stoker ParquetDataset, shuffled (window 32)":
                lambda: stoker.DataLoader(pds(paths), batch_size=a.batch, num_workers=2,
                                          shuffle=True, max_memory=a.max_memory),
        }
        mix_parts = []
        if a.mix:
            def mixed():
                parts = [pds(p, shuffle_window=a.mix) for p in paths]
                mix_parts[:] = parts
                mix = stoker.Mix(parts, [len(x) for x in parts], seed=1)
                return stoker.DataLoader(mix, batch_size=a.batch, num_workers=2, shuffle=True,
                                         max_memory=a.max_memory)
            runs[f"stoker Mix of {len(paths)} file sources, shuffled (window {a.mix} each)"] = mixed
        best = {k: 0.0 for k in runs}
        for _ in range(a.rounds):
            for k, make in runs.items():
                if a.cold:
                    evict(paths)
                best[k] = max(best[k], timed(make(), n))
        base = best["pyarrow to_batches(use_threads=True) + from_numpy"]
        print(f"| loader | rows/s | vs pyarrow |\n|---|---|---|")
        for k, v in best.items():
            print(f"| {k} | {v:,.0f} | {v / base:.2f}x |")
        seq, shuf = best["stoker ParquetDataset, sequential (2 threads)"], best["stoker ParquetDataset, shuffled (window 32)"]
        print(f"shuffled / sequential: {shuf / seq:.2f}x")
        if mix_parts:
            decoded = sum(x.stats()["row_groups_decoded"] for x in mix_parts)
            print(f"Mix shuffled / sequential: {list(best.values())[-1] / seq:.2f}x; its last epoch decoded {decoded} "
                  f"row groups of {a.files * a.groups}")


if __name__ == "__main__":
    main()
