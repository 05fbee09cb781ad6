"""The cost of a global shuffle of Parquet rows (ParquetDataset(...,
shuffle_window="global"): each row read through its pages) against the
windowed shuffle and the sequential scan, in the same run, on files this
script writes with a page index.

    python bench/parquet_global.py [--rows 65536] [--page-size 65536] [--cache-mib 64]

Columns: id int64, label int32, emb fixed_size_list<float32>[256], text
(~200 B).  Rows/s, warm page cache, 2 reader threads; and the pages each
epoch decoded.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import stoker
import stoker.io


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=65536)
    ap.add_argument("--group-rows", type=int, default=8192)
    ap.add_argument("--page-size", type=int, default=65536, help="pyarrow's data_page_size (bytes)")
    ap.add_argument("--cache-mib", type=int, default=64, help="the cache of each loader (MiB)")
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n = a.rows
    t = pa.table({"id": np.arange(n, dtype=np.int64), "label": rng.integers(0, 1000, n).astype(np.int32),
                  "emb": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 256).astype(np.float32)), 256),
                  "text": [("row %d " % i) * 25 for i in range(n)]})
    with tempfile.TemporaryDirectory(dir=os.environ.get("STOKER_BENCH_DIR")) as d:
        pq.write_table(t, os.path.join(d, "a.parquet"), row_group_size=a.group_rows, write_page_index=True,
                       data_page_size=a.page_size, compression="zstd")
        print(f"{n} rows, row groups of {a.group_rows}, pages of {a.page_size} B, caches of {a.cache_mib} MiB")
        print("| epoch | rows/s | vs sequential | decodes |\n|---|---|---|---|")
        seq = None
        for name, window, shuffle in (("sequential", 32, False), ("shuffled, window 4", 4, True),
                                      ("global shuffle", "global", True)):
            ds = stoker.io.ParquetDataset(d, shuffle_window=window, cache_bytes=a.cache_mib << 20)
            loader = stoker.DataLoader(ds, batch_size=a.batch, num_workers=2, shuffle=shuffle)
            t0 = time.perf_counter()
            rows = sum(len(b["id"]) for b in loader)
            rate = rows / (time.perf_counter() - t0)
            seq = seq or rate
            st = ds.stats()
            dec = f"{st['pages_decoded']} pages" if window == "global" else f"{st['row_groups_decoded']} row groups"
            print(f"| {name} | {rate:,.0f} | {rate / seq:.3f}x | {dec} |")


if __name__ == "__main__":
    main()
