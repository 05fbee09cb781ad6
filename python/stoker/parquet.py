"""stoker.io.ParquetDataset: the rows of Parquet files, read natively.

Apache Arrow's C++ Parquet reader decodes whole row groups (only the
requested columns' chunks are read from the files); C++ threads copy each
row's values into the batch, with no Python object per row.  A shuffled epoch
visits the row groups in a shuffled order, `shuffle_window` of them at a
time, and shuffles the rows of each such window together: each row group is
decoded once per epoch, so a shuffled epoch reads as fast as a sequential
one.  Remote files (http(s)://, s3://) are read by range requests.
docs/parquet.md has the column types, the shuffle's cost and what is left
for later.

Needs pyarrow (whose libarrow and libparquet stoker's module links); the
rest of stoker never imports it.
"""
from __future__ import annotations

import os
import warnings
from typing import Iterator, Mapping, Optional, Sequence

from stoker import _native as N
from stoker._store import _storage_options
from stoker._sampling import EpochPasses
from stoker.io import NativeDataset, _paths, source_of


def _module():
    try:
        import pyarrow  # noqa: F401  (loads the libarrow and libparquet the module links)
    except ImportError as e:
        raise ImportError("stoker.io.ParquetDataset needs pyarrow: pip install pyarrow") from e
    try:
        from stoker import _stoker_parquet
    except ImportError as e:
        raise ImportError("stoker.io.ParquetDataset: this stoker was built without pyarrow installed, so without "
                          "its Parquet module; install pyarrow, then reinstall stoker "
                          f"(pip install --no-build-isolation --force-reinstall stoker): {e}") from e
    return _stoker_parquet


def _files(paths) -> list:
    """Local paths (files, directories, globs: stoker.io's rules) and URLs
    (http(s)://, s3://: as given; "s3://bucket/prefix/" is listed natively)."""
    one = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    remote = [os.fspath(p) for p in one if str(os.fspath(p)).startswith(("http://", "https://", "s3://"))]
    if remote and len(remote) != len(one):
        raise ValueError("ParquetDataset: give local files or URLs, not both")
    return remote or _paths(paths, "ParquetDataset", in_dir=(".parquet", ".pq"))


_LISTS = {"offsets": "offsets", "padded": "padded", "tensors": "each"}
_STRINGS = {"objects": "each", "offsets": "offsets", "padded": "padded"}


class ParquetDataset(NativeDataset):
    """ParquetDataset(paths, columns=None, shuffle_window=32, null_mask=False,
    cache_bytes=None, lists="offsets", strings="objects"): the rows of
    Parquet files, a field per column.

    paths: a file, a directory (its *.parquet files), a glob, or a list of
    them; every file must have the columns read, of the same types.
    columns: the columns to read (None: all of the first file's).  A number
    column is a tensor [B]; a fixed-size list of numbers [B, n]; a string
    column a list of str, a binary one a list of bytes; dictionary-encoded
    columns are decoded.  A list of numbers is, in a batch, by `lists`:
    "offsets" {"values": the rows' elements end to end, "offsets": int64
    [B + 1]}, row i being values[offsets[i]:offsets[i + 1]]; "padded"
    {"values": [B, L] zero-filled, L the batch's longest row, "lengths":
    int64 [B]}; "tensors" a list of B 1-D tensors.  `strings` does the same
    for string and binary columns: "objects" (str / bytes), "offsets" or
    "padded" (their bytes, uint8: no Python object per row).
    A null is an error naming the file, row group, column and row; with
    null_mask=True it reads as zeros (an empty value) and each nullable
    column gets a bool field "<column>.valid".
    shuffle_window: the row groups whose rows a shuffled epoch mixes at a
    time (stoker.DataLoader(..., shuffle=True)); "global": a shuffle of every
    row, each read through its pages (the files need a page index: write
    them with write_page_index=True; docs/parquet.md says its cost).
    cache_bytes: decoded row groups (or a global shuffle's pages) kept
    (None: sized by stoker.DataLoader to its epochs, see size_cache;
    before that, the window's largest ones and 64 MiB)."""

    def __init__(self, paths, columns: Optional[Sequence[str]] = None, shuffle_window: int = 32,
                 null_mask: bool = False, cache_bytes: Optional[int] = None,
                 storage_options: Optional[Mapping[str, str]] = None, lists: str = "offsets",
                 strings: str = "objects"):
        if lists not in _LISTS:
            raise ValueError(f"ParquetDataset: lists should be one of {', '.join(map(repr, _LISTS))}, got {lists!r}")
        if strings not in _STRINGS:
            raise ValueError(f"ParquetDataset: strings should be one of {', '.join(map(repr, _STRINGS))}, "
                             f"got {strings!r}")
        if shuffle_window != "global" and (not isinstance(shuffle_window, int) or isinstance(shuffle_window, bool)
                                           or shuffle_window < 1):
            raise ValueError(f"ParquetDataset: shuffle_window should be an int >= 1 or 'global', got {shuffle_window!r}")
        if cache_bytes is not None and (not isinstance(cache_bytes, int) or cache_bytes < 1):
            raise ValueError(f"ParquetDataset: cache_bytes should be a positive int or None, got {cache_bytes!r}")
        if isinstance(columns, str):
            columns = [columns]
        files = _files(paths)
        cols = [str(c) for c in columns] if columns is not None else []
        opts = _storage_options(storage_options, "ParquetDataset")
        self._args = (files, None if columns is None else cols, shuffle_window, bool(null_mask), cache_bytes,
                      storage_options, lists, strings)
        self._native = _module().ParquetDataset.open(files, cols, 0 if shuffle_window == "global" else shuffle_window,
                                                     bool(null_mask), cache_bytes or 0, opts, _LISTS[lists],
                                                     _STRINGS[strings])
        self._leaves = list(self._native.leaves)
        self._auto_cache = cache_bytes is None

    def size_cache(self, shuffle: bool, readers: int):
        """Without cache_bytes, the cache is sized to the loader's epochs
        (stoker.DataLoader calls this): shuffled, the window's largest row
        groups and 2 more; in order, one per reader and 4 more (the decoder
        ahead's); and 64 MiB.  A cache_bytes given is kept.  A shuffled
        epoch's rows are staged (copied out as their sizes are read: the
        source of a Mix too, whose epochs are the Mix's)."""
        self._native.stage_rows(bool(shuffle))
        if not self._auto_cache:
            self._check_cache(shuffle)
            return
        held = self._native.window + 2 if shuffle else max(1, int(readers)) + 4  # (global, window 0: pages in 2)
        budget = int(self._native.cache_bytes_for(held))
        self._native.set_cache_budget(budget)
        self._args = self._args[:4] + (budget,) + self._args[5:]  # (a pickled copy has the same cache)

    def _check_cache(self, shuffle: bool) -> None:
        """Warns when a cache_bytes given cannot hold a shuffle window's row
        groups: each would be decoded again and again (at issue 51's size, a
        16 MiB cache made 41,139 decodes of 256 row groups, 115 rows/s)."""
        window = int(self._native.window)
        if not shuffle or window == 0:  # (in order, or the global shuffle's pages)
            return
        # (cache_bytes_for adds the same slack to any count: 0 row groups is the slack alone)
        need = int(self._native.cache_bytes_for(window)) - int(self._native.cache_bytes_for(0))
        given = int(self._native.stats()["cache_budget"])
        if given < need:
            warnings.warn(f"ParquetDataset: cache_bytes={given} holds less than a shuffle window ({window} row groups, "
                          f"up to {need} bytes decoded): a shuffled epoch will decode its row groups many times over. "
                          f"Raise cache_bytes to at least {need}, lower shuffle_window, or leave cache_bytes unset "
                          "(stoker.DataLoader then sizes it to the window)", RuntimeWarning, stacklevel=4)

    @property
    def row_groups(self) -> list[tuple[int, int]]:
        """(first row, rows) of each row group, in file order."""
        return [tuple(g) for g in self._native.row_groups]

    def _groups_digest(self) -> str:
        """A digest of the row groups' sizes (a resumed epoch's check)."""
        import hashlib
        sizes = ",".join(str(n) for _f, n in self._native.row_groups)
        return hashlib.blake2b(sizes.encode(), digest_size=8).hexdigest()

    def stats(self) -> dict:
        """Row groups decoded (again, after an eviction, counted again), the
        decoded bytes held now and at most, the most the cache holds
        (cache_budget), evictions, and for remote files the requests made and
        bytes fetched: in this process."""
        return dict(self._native.stats())

    _holds_loader_memory = True  # (stoker.DataLoader: memory_bytes comes out of max_memory)

    @property
    def memory_bytes(self) -> int:
        """What this dataset holds of a loader's max_memory: its decoded row
        groups' budget, and the freed blocks its decodes keep for the next
        ones (pool_keep).  stoker.DataLoader gives the slot pool the rest."""
        s = self._native.stats()
        return int(s["cache_budget"]) + int(s["pool_keep"])

    def sampler(self, shuffle: bool = False, seed: int = 0, rank: int = 0, world_size: int = 1, pad: bool = True):
        """The sampler stoker.DataLoader gives this dataset (RowGroupSampler)."""
        return RowGroupSampler(self, shuffle=shuffle, seed=seed, rank=rank, world_size=world_size, pad=pad)


try:
    from torch.utils.data import Sampler as _SamplerBase
except ImportError:  # (stoker.io works without torch)
    _SamplerBase = object


class RowGroupSampler(EpochPasses, _SamplerBase):
    """The order of a ParquetDataset's epochs (stoker.DataLoader makes one):
    the row groups in order, or shuffled `shuffle_window` at a time with
    their rows shuffled together; rank r takes the r-th of world_size equal
    runs of it (padded by repeating its start, or cut).  Each pass is the
    next epoch unless set_epoch() says which."""

    def __init__(self, dataset: ParquetDataset, shuffle: bool = False, seed: int = 0, rank: int = 0,
                 world_size: int = 1, pad: bool = True):
        self.dataset, self.shuffle, self.seed = dataset, bool(shuffle), int(seed)
        self.rank, self.world_size, self.pad = rank, world_size, pad

    def __len__(self) -> int:
        return N.lib.samples_per_rank(len(self.dataset), self.world_size, self.pad)

    def _stoker_native_order(self):
        return self.dataset._native.order(self._begin_epoch(), self.shuffle, self.seed & 0xFFFF_FFFF_FFFF_FFFF,
                                          self.rank, self.world_size, self.pad)

    def _stoker_recipe(self):
        """The global order of the epoch begun (stoker._topology): the row
        groups' sizes travel as a digest, so that a state is resumed over
        the same row groups only."""
        return dict(kind="row_groups", n=len(self.dataset), epoch=self._begun, shuffle=self.shuffle,
                    seed=self.seed & 0xFFFF_FFFF_FFFF_FFFF, window=self.dataset._native.window,
                    groups=self.dataset._groups_digest(), world=self.world_size, rank=self.rank, pad=self.pad,
                    split="contiguous")

    def global_order_of(self, recipe: dict):
        """The global order a state's recipe describes, over this dataset."""
        ds = self.dataset
        if recipe.get("groups") != ds._groups_digest() or int(recipe["window"]) != ds._native.window:
            raise ValueError("stoker: the state's epoch is of other Parquet row groups (or another shuffle_window) "
                             f"than this loader's {ds._native.describe()}: resume with the same files and options")
        return ds._native.global_order(int(recipe["epoch"]), bool(recipe["shuffle"]), int(recipe["seed"]))

    def __iter__(self) -> Iterator[int]:
        from stoker._sampling import iterate
        return iterate(self._stoker_native_order())


def parquet_source(dataset) -> Optional[ParquetDataset]:
    """The ParquetDataset `dataset` is (or maps), or None."""
    return source_of(dataset, ParquetDataset)


__all__ = ["ParquetDataset", "RowGroupSampler"]
