"""`stoker pack`: a directory of .npy / raw files -> TFRecord or tar shards."""
from __future__ import annotations

import os
import sys

import numpy as np


def _samples(src: str, dtype: str | None, shape: tuple | None):
    """(key, array) for every sample under src, in name order: each .npy
    file is one sample; any other file is a flat run of records of
    (dtype, shape) (--dtype/--shape needed)."""
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs if not f.startswith("."))
    if not files:
        raise ValueError(f"no files under {src}")
    raw_spec = None
    if dtype is not None or shape is not None:
        if dtype is None or shape is None:
            raise ValueError("--dtype and --shape go together (the record layout of raw files)")
        raw_spec = (np.dtype(dtype), tuple(shape))
    for path in files:
        rel = os.path.splitext(os.path.relpath(path, src))[0].replace(os.sep, "_")
        if path.endswith(".npy"):
            yield rel, np.load(path, mmap_mode="r", allow_pickle=False)
            continue
        if raw_spec is None:
            print(f"stoker pack: skipping {path} (not .npy; give --dtype and --shape to pack raw files)",
                  file=sys.stderr)
            continue
        dt, shp = raw_spec
        rec = dt.itemsize * int(np.prod(shp))
        size = os.path.getsize(path)
        if size % rec:
            raise ValueError(f"{path}: {size} bytes is not a whole number of {rec}-byte records "
                             f"({dt.name} {shp})")
        arr = np.memmap(path, dtype=dt, mode="r", shape=(size // rec, *shp)) if size else np.empty((0, *shp), dt)
        for i in range(arr.shape[0]):
            yield f"{rel}_{i:06d}", arr[i]


def pack(src: str, out: str, fmt: str, shard_samples: int, shard_bytes: int, feature: str,
         dtype: str | None = None, shape: tuple | None = None) -> int:
    from stoker import io
    if not os.path.isdir(src):
        raise ValueError(f"{src} is not a directory (stoker pack takes a directory of .npy or raw files)")
    os.makedirs(out, exist_ok=True)
    first: list = []
    count = 0

    def track(gen):
        nonlocal count
        for key, a in gen:
            if not first:
                first.append((a.dtype, a.shape))
            elif (a.dtype, a.shape) != first[0]:
                raise ValueError(f"sample {key}: {a.dtype} {a.shape} differs from the first sample's "
                                 f"{first[0][0]} {first[0][1]} (native datasets need one dtype and shape)")
            count += 1
            yield key, a

    samples = track(_samples(src, dtype, shape))
    if fmt == "tar":
        paths = io.write_tar_shards(os.path.join(out, "shard-%06d.tar"),
                                    ({"__key__": k, "npy": a} for k, a in samples),
                                    maxcount=shard_samples, maxsize=shard_bytes)
        how = 'stoker.io.TarShardDataset(sorted(glob("%s/*.tar")))' % out
    else:
        # float32 as float_list; anything else as its raw bytes (exact).
        paths, batch, size = [], [], 0

        def flush():
            if batch:
                p = os.path.join(out, f"shard-{len(paths):06d}.tfrecord")
                io.write_tfrecord(p, batch)
                paths.append(p)
                batch.clear()

        for _, a in samples:
            value = np.ascontiguousarray(a) if a.dtype == np.float32 else np.ascontiguousarray(a).tobytes()
            batch.append({feature: value})
            size += a.nbytes
            if len(batch) >= shard_samples or size >= shard_bytes:
                flush()
                size = 0
        flush()
        if first:
            how = 'stoker.io.TFRecordDataset(sorted(glob("%s/*.tfrecord")), features={%r: (%r, %r)})' % (
                out, feature, first[0][0].name, tuple(first[0][1]))
        else:
            how = ""
    print(f"stoker pack: {count} samples into {len(paths)} {fmt} shards in {out}")
    if how:
        print(f"read them with: {how}")
    return count
