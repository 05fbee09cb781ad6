"""A Mix of ParquetDatasets (issue 51): a shuffled source-epoch of a Parquet
source takes its row groups `shuffle_window` at a time (order/window_order.h),
so each row group is decoded once per source-epoch with a cache of a window,
read natively, resumed exactly on another topology."""
import collections

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import stoker  # noqa: E402
import stoker.io  # noqa: E402
from test_elastic_resume import exactly_once, run_segments  # noqa: E402

# Three sources of 12, 9 and 16 row groups of 100, 100 and 50 rows; a row's
# id is unique across them.
LAYOUT = [(12, 100), (9, 100), (16, 50)]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("pqmix")
    first, dirs = 0, []
    for s, (groups, rows) in enumerate(LAYOUT):
        n = groups * rows
        emb = pa.FixedSizeListArray.from_arrays(pa.array(np.full(n * 32, s, dtype=np.float32)), 32)
        t = pa.table({"id": np.arange(first, first + n, dtype=np.int64), "emb": emb})
        (d / f"s{s}").mkdir()
        half = groups // 2 * rows
        pq.write_table(t.slice(0, half), d / f"s{s}" / "a.parquet", row_group_size=rows)
        pq.write_table(t.slice(half), d / f"s{s}" / "b.parquet", row_group_size=rows)
        dirs.append(d / f"s{s}")
        first += n
    return dirs, first


def one_group_bytes(d):
    """A source's decoded bytes a row group (read once, all kept)."""
    ds = stoker.io.ParquetDataset(d)
    for _ in stoker.DataLoader(ds, batch_size=1000):
        pass
    return ds.stats()["decoded_bytes"] / len(ds.row_groups)


def make_mix(dirs, cache_groups=None, window=3):
    # (a cache of `cache_groups` decoded row groups of each source)
    out = [stoker.io.ParquetDataset(d, shuffle_window=window, cache_bytes=None if cache_groups is None else
                                    int(cache_groups * one_group_bytes(d))) for d in dirs]
    # Weights as the sizes: each source's source-epoch is the mixed epoch.
    return stoker.Mix(out, [g * r for g, r in LAYOUT], seed=11), out


def test_a_shuffled_mix_decodes_each_parquet_row_group_once_per_source_epoch(sources):
    dirs, total = sources
    # Each source's cache holds its window of 3 row groups and 2.5 more.
    mix, parts = make_mix(dirs, cache_groups=5.5)
    assert mix.shards is not None and [s[0] for s in mix.shards] == [3, 3, 3]
    orders = []
    for epoch in range(2):
        loader = stoker.DataLoader(mix, batch_size=40, shuffle=True, num_workers=2)
        loader.set_epoch(epoch)
        got = [i for b in loader for i in b["id"].tolist()]
        assert loader.stats()["native"]["threads"] == 2, "a Mix of Parquet sources is read by C++ threads"
        assert sorted(got) == list(range(total)), "every row of every source once"
        orders.append(got)
        for s, ds in enumerate(parts):
            st = ds.stats()
            # Without the windows each source's rows came from all its row
            # groups at once: a cache of 5.5 decoded 1,227-2,101 row groups
            # in 3 epochs (of 9-16 a source).  A Mix's cache does not know
            # the source's positions (its reads are the Mix's): a reader that
            # begins the next window waits for the row groups begun and not
            # finished (a window's last rows, being read by the other
            # reader) before it drops any.  Without that wait, a row group
            # or two, sometimes three, was decoded again.
            assert st["row_groups_decoded"] <= (epoch + 1) * LAYOUT[s][0], (s, epoch, st)
            assert st["behind_timeouts"] == 0, (s, epoch, st)
    assert orders[0] != orders[1]
    # Within a source its rows come a window of row groups at a time: at
    # most 3 of its row groups are begun and not finished at any point.
    first = 0
    for groups, rows in LAYOUT:
        mine = [i - first for i in orders[0] if first <= i < first + groups * rows]
        left, open_, most = [rows] * groups, set(), 0
        for i in mine:
            open_.add(i // rows)
            most = max(most, len(open_))
            left[i // rows] -= 1
            if left[i // rows] == 0:
                open_.discard(i // rows)
        assert most <= 3, most
        first += groups * rows


def test_the_sources_caches_are_sized_by_the_loader_and_part_of_max_memory(sources):
    dirs, _ = sources
    mix, parts = make_mix(dirs, window=2)
    loader = stoker.DataLoader(mix, batch_size=40, shuffle=True, num_workers=2, max_memory=256 << 20)
    held = sum(ds.memory_bytes for ds in parts)
    assert held == sum(ds.stats()["cache_budget"] + ds.stats()["pool_keep"] for ds in parts) > 0
    for _ in loader:
        pass
    assert loader.stats()["dataset_memory_bytes"] == held
    with pytest.raises(ValueError, match="max_memory"):
        stoker.DataLoader(make_mix(dirs, window=2)[0], batch_size=40, shuffle=True, max_memory=held + (1 << 20))


def test_a_mix_of_parquet_sources_resumes_on_4_3_6_1_ranks_with_every_row_once(sources):
    dirs, total = sources
    mix, _ = make_mix(dirs)

    def make(world, rank, workers, batch):
        return stoker.DataLoader(mix, batch_size=batch, num_workers=workers, shuffle=True,
                                 sampler=stoker.mix.MixSampler(mix, shuffle=True, rank=rank, world_size=world,
                                                               pad=False), drop_last=False)
    counts, _ = run_segments(make, [(4, 3, 60, 2), (3, 2, 80, 2), (6, 5, 60, 1), (1, 0, 16, None)],
                             ids=lambda b: b["id"].tolist())
    exactly_once(counts, total)


def test_a_state_of_a_mix_with_other_row_groups_or_windows_is_refused_mid_epoch(sources):
    dirs, _ = sources
    mix, _ = make_mix(dirs)
    loader = stoker.DataLoader(mix, batch_size=40, shuffle=True)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del it
    recipe = state["order"]["recipe"]
    assert "shards" not in recipe and len(recipe["shards_digests"]) == 3, "the shards travel as digests"
    again = stoker.DataLoader(make_mix(dirs)[0], batch_size=40, shuffle=True)
    again.load_state_dict(state)
    assert len([1 for _ in again]) == len(loader) - 1
    # Source 1 with another window: its order would change under its counter.
    other = stoker.Mix([stoker.io.ParquetDataset(d, shuffle_window=4 if s == 1 else 3) for s, d in enumerate(dirs)],
                       [g * r for g, r in LAYOUT], seed=11)
    with pytest.raises(ValueError, match="source 1 of the Mix had other row groups or another shuffle_window"):
        bad = stoker.DataLoader(other, batch_size=40, shuffle=True)
        bad.load_state_dict(state)
        next(iter(bad))


def test_a_global_shuffle_reads_each_row_through_its_pages(tmp_path):
    # Files with a page index and small pages; every kind of column, nulls
    # masked; the order a shuffle of every row (not windows of row groups).
    from test_parquet import batch_rows, check_row, expected, table
    t = table(1200)
    pq.write_table(t.slice(0, 700), tmp_path / "a.parquet", row_group_size=350, write_page_index=True,
                   data_page_size=2048, compression="zstd")
    pq.write_table(t.slice(700), tmp_path / "b.parquet", row_group_size=250, write_page_index=True,
                   data_page_size=2048, compression="snappy")
    ds = stoker.io.ParquetDataset(tmp_path, shuffle_window="global", null_mask=True)
    loader = stoker.DataLoader(ds, batch_size=50, shuffle=True, num_workers=2, seed=4)
    got = []
    for b in loader:
        for i, row in zip(b["id"].tolist(), batch_rows(b)):
            got.append(i)
            if i % 97 == 0:
                check_row(row, expected(t, i))
    assert sorted(got) == list(range(1200))
    # Not windows of row groups: the first 100 rows come from every row group.
    groups = [0, 350, 700, 950, 1200]
    assert len({int(np.searchsorted(groups, i, side="right")) for i in got[:100]}) == 4
    st = ds.stats()
    assert st["pages_decoded"] > 0 and st["row_groups_decoded"] == 0, st
    # An epoch in order reads row groups, in order.
    seq = [i for b in stoker.DataLoader(ds, batch_size=100) for i in b["id"].tolist()]
    assert seq == list(range(1200)) and ds.stats()["row_groups_decoded"] == 4
    # Resumed on other ranks, exactly once.

    def make(world, rank, workers, batch):
        return stoker.DataLoader(ds, batch_size=batch, num_workers=workers,
                                 sampler=ds.sampler(shuffle=True, seed=4, rank=rank, world_size=world, pad=False),
                                 drop_last=False)
    counts, _ = run_segments(make, [(4, 3, 60, 2), (3, 2, 80, 1), (1, 0, 16, None)], ids=lambda b: b["id"].tolist())
    exactly_once(counts, 1200)


def test_a_global_shuffle_needs_a_page_index_and_says_how_to_write_one(tmp_path):
    pq.write_table(pa.table({"id": np.arange(10)}), tmp_path / "plain.parquet")
    with pytest.raises(ValueError, match=r"plain.parquet has no page index.*write_page_index=True"):
        stoker.io.ParquetDataset(tmp_path, shuffle_window="global")
    with pytest.raises(ValueError, match="int >= 1 or 'global'"):
        stoker.io.ParquetDataset(tmp_path, shuffle_window="all")
