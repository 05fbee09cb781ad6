"""Parquet to torch batches: stoker.io.ParquetDataset against the loaders that
read Parquet (HF datasets plain and shuffled, Grain's ParquetIterDataset,
litData's StreamingDataset with its ParquetLoader, which reads with polars)
and torch's DataLoader over read_row_group, in the same run, on the files
bench/parquet.py writes.  Run with the peers' Python (docs/benchmarks.md):

    PYTHONPATH=python /tmp/peers/bin/python bench/parquet_peers.py --files 4 --groups 8 --rows 2048

Each loader yields batches of 256 rows as a training loop takes them
(tensors for id, label and emb; text and img as lists of str and bytes).
HF datasets first converts the files to its Arrow cache (not timed).
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings

import numpy as np
import torch

import stoker
import stoker.io

from parquet import RowGroups, prepared, timed  # (bench/parquet.py: the files and torch's baseline)


def hf(paths, batch, shuffle, cache_dir):
    import datasets
    ds = datasets.load_dataset("parquet", data_files=paths, split="train", cache_dir=cache_dir)
    if shuffle:
        ds = ds.shuffle(seed=0)
    ds = ds.with_format("torch", columns=["id", "label", "emb"], output_all_columns=True)
    return lambda: ds.iter(batch_size=batch)


def grain(paths, batch, shuffle):
    import grain.python as gp
    from grain.experimental import ParquetIterDataset

    def make():
        parts = [ParquetIterDataset(p) for p in paths]
        rows = gp.experimental.InterleaveIterDataset(gp.MapDataset.source(parts), cycle_length=len(parts))
        if shuffle:
            rows = gp.experimental.WindowShuffleIterDataset(rows, window_size=8192, seed=0)

        return rows.batch(batch, batch_fn=rows_to_torch)
    return make


def rows_to_torch(rs):
    """A batch of row dicts (Grain's, litData's) as the others give it."""
    return {"id": torch.tensor([r["id"] for r in rs]), "label": torch.tensor([r["label"] for r in rs]),
            "emb": torch.from_numpy(np.stack([np.asarray(r["emb"], np.float32) for r in rs])),
            "text": [r["text"] for r in rs], "img": [r["img"] for r in rs]}


def litdata_loader(data_dir, batch, shuffle, workers=2):
    """litData's StreamingDataset over the Parquet files as they are
    (index_parquet_dataset writes its index.json beside them, not timed),
    each row a dict from polars, batched by its StreamingDataLoader; its
    workers are spawned (it refuses fork), and their start is timed, as a
    training loop waits for it."""
    import litdata
    from litdata.streaming.item_loader import ParquetLoader
    if not os.path.exists(os.path.join(data_dir, "index.json")):
        litdata.index_parquet_dataset(data_dir)

    def make():
        ds = litdata.StreamingDataset(data_dir, item_loader=ParquetLoader(), shuffle=shuffle, seed=0)
        # (spawn: litData refuses fork with polars' thread pool, litData#823)
        return litdata.StreamingDataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=rows_to_torch,
                                           multiprocessing_context="spawn")
    return make


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", default=None,
                    help="a directory for the files, kept: written if empty, else read as it is; litData's copy "
                         "goes beside it (DIR.lit), kept too")
    ap.add_argument("--max-memory", type=int, default=None,
                    help="stoker's max_memory (a shuffled epoch's window of row groups is in it)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("STOKER_BENCH_DIR")) as d, \
            tempfile.TemporaryDirectory(dir=os.environ.get("STOKER_BENCH_DIR")) as cache:
        data = a.data or os.path.join(d, "data")
        n = prepared(data, a.files, a.groups, a.rows)
        paths = sorted(os.path.join(data, f) for f in os.listdir(data))
        # (litData's copy: its index and cache beside the files, out of the others' way)
        lit = (a.data.rstrip("/") + ".lit") if a.data else os.path.join(d, "lit")
        if not os.path.exists(lit):
            shutil.copytree(data, lit)
        print(f"{a.files} files x {a.groups} row groups x {a.rows} rows = {n} rows")
        runs = {
            "stoker ParquetDataset, sequential": lambda: stoker.DataLoader(
                stoker.io.ParquetDataset(paths), batch_size=a.batch, num_workers=2, max_memory=a.max_memory),
            "stoker ParquetDataset, shuffled": lambda: stoker.DataLoader(
                stoker.io.ParquetDataset(paths), batch_size=a.batch, num_workers=2, shuffle=True,
                max_memory=a.max_memory),
            "torch DataLoader over read_row_group (2 workers)": lambda: torch.utils.data.DataLoader(
                RowGroups(paths), batch_size=None, num_workers=2),
            "HF datasets with_format('torch')": hf(paths, a.batch, False, cache),
            "HF datasets .shuffle() with_format('torch')": hf(paths, a.batch, True, cache),
            "Grain ParquetIterDataset": grain(paths, a.batch, False),
            "Grain ParquetIterDataset, window shuffle 8192": grain(paths, a.batch, True),
            "litData StreamingDataset + ParquetLoader (2 workers)": litdata_loader(lit, a.batch, False),
            "litData StreamingDataset + ParquetLoader, shuffled (2 workers)": litdata_loader(lit, a.batch, True),
        }
        best = {k: 0.0 for k in runs}
        for _ in range(a.rounds):
            for k, make in runs.items():
                best[k] = max(best[k], timed(make(), n))
        peers = max(v for k, v in best.items() if not k.startswith("stoker"))
        print("| loader | rows/s | stoker sequential vs it |\n|---|---|---|")
        seq = best["stoker ParquetDataset, sequential"]
        for k, v in best.items():
            print(f"| {k} | {v:,.0f} | {seq / v:.1f}x |")
        print(f"stoker sequential / best peer: {seq / peers:.1f}x; "
              f"stoker shuffled / best peer: {best['stoker ParquetDataset, shuffled'] / peers:.1f}x")


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"({time.time() - t0:.0f} s)")
