"""Mixtures of datasets by weight (docs/mixing.md).

    mix = stoker.Mix([web, code, books], [0.6, 0.3, 0.1], seed=0)
    loader = stoker.DataLoader(mix, batch_size=64, shuffle=True, num_workers=4)

A Mix is a map-style dataset whose item p is position p of a mixed epoch:
position p takes its source by the largest deficit (the source i with the
largest w_i * (p + 1) - c_i, c_i the samples it took before; src/order/
mix_order.h), so every prefix of the epoch is within one sample of the
weights, and the source's next sample in its own order: each source is read
once per source-epoch, shuffled per source-epoch when the loader shuffles.
A source that runs out starts its next source-epoch (on_exhausted="cycle"),
or the mixed epoch ends before any source would (on_exhausted="stop").

The epoch's order is a function of (seed, epoch, the sources' sizes and
weights) alone.  stoker.DataLoader makes it once, in the main process
(MixSampler: the order of the samples' global indices, the sources laid end
to end), and its workers only route each index to its source; a Mix of
stoker.io datasets with the same fields is read by C++ threads (MixedDataset,
src/io/mixed_dataset.h), no Python per sample.  Its `shuffle` shuffles each
source's samples, not the positions, which would lose the prefixes'
proportions.  It splits between ranks, resumes, and resumes on another
topology (the state says the mix's recipe) as any map-style dataset.
Any other loader (torch's) reads it by position: mix[p] computes position p's
sample in its own process.
"""
from __future__ import annotations

import bisect
import hashlib
import itertools
from typing import Optional, Sequence

import numpy as np

from stoker import _mix_state, _native as N
from stoker._sampling import EpochPasses
from stoker.io import NativeDataset

try:
    from torch.utils.data import Dataset as _Base
except ImportError:  # pragma: no cover - numpy-only use
    _Base = object

__all__ = ["Mix", "MixSampler"]


def _name_key(name: str) -> int:
    """A named source's identity across a change of the mix (its shuffle key):
    a digest of its name, apart from the index keys (1..k) of a list's."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") | (1 << 63)


class Mix(_Base):
    """Mix(sources, weights, *, seed=0, epoch_samples=None, on_exhausted="cycle")

    sources: map-style datasets (any with __len__ and __getitem__: Python
    Datasets, stoker.io datasets, StreamingDatasets, Mixes), each sample what
    its source returns; a list, or a dict of them by name.  weights: one per
    source, > 0, normalised (a dict by name for named sources, or a list in
    their order).  A resume with a Mix of other weights or sources
    (load_state_dict) goes on from each kept source's place: a list's sources
    are the same source by index, a dict's by name.
    epoch_samples: the mixed epoch's length (default: the sum of the sources'
    lengths).  on_exhausted: "cycle" or "stop".  set_epoch(e) (the loader
    calls it in every worker) chooses the epoch's shuffles.
    """

    def __init__(self, sources: Sequence, weights: Sequence[float], *, seed: int = 0,
                 epoch_samples: Optional[int] = None, on_exhausted: str = "cycle"):
        self.names = None
        if isinstance(sources, dict):
            self.names = [str(n) for n in sources]
            if isinstance(weights, dict):
                missing = sorted(set(self.names) ^ {str(n) for n in weights})
                if missing:
                    raise ValueError(f"Mix: the sources and the weights name different sources: {missing}")
                weights = [weights[n] for n in sources]
            sources = list(sources.values())
        elif isinstance(weights, dict):
            raise TypeError("Mix: weights by name are for sources by name (a dict of datasets)")
        self.sources = list(sources)
        if len(list(weights)) != len(self.sources):
            raise ValueError(f"Mix: {len(list(weights))} weights for {len(self.sources)} sources")
        if on_exhausted not in ("cycle", "stop"):
            raise ValueError(f"Mix: on_exhausted={on_exhausted!r} is not one of 'cycle', 'stop'")
        if epoch_samples is not None and (not isinstance(epoch_samples, int) or isinstance(epoch_samples, bool)
                                          or epoch_samples < 1):
            raise ValueError(f"Mix: epoch_samples should be an int >= 1 or None, got {epoch_samples!r}")
        sizes = []
        for i, s in enumerate(self.sources):
            try:
                sizes.append(len(s))
            except TypeError:
                raise TypeError(f"Mix: source {i} ({type(s).__name__}) has no len(): sources are map-style "
                                "datasets") from None
        self.sizes = sizes
        self.weights = [float(w) for w in weights]
        self.seed = int(seed)
        self.epoch_samples = epoch_samples
        self.on_exhausted = on_exhausted
        self.shuffle = False  # (read by position: stoker.DataLoader(shuffle=True) with a sampler of the user's sets it)
        self.epoch = 0
        self.keys = [_name_key(n) for n in self.names] if self.names is not None else None
        self.shards = _shards_of(self.sources)
        self._offsets = list(itertools.accumulate(sizes, initial=0))
        self._order = None
        self._len = len(self._make_order())  # (checks the sizes and weights: the errors are C++'s)

    def _make_order(self):
        return self._epoch_order(self.epoch, self.shuffle)

    def __len__(self) -> int:
        return self._len

    def set_epoch(self, epoch: int) -> None:
        if int(epoch) != self.epoch:
            self.epoch = int(epoch)
            self._order = None

    def locate(self, position: int) -> tuple[int, int]:
        """(source, index within it) of mixed position `position` this epoch."""
        if not 0 <= position < self._len:
            raise IndexError(f"Mix: position {position} is out of range for a mixed epoch of {self._len}")
        if self._order is None:
            self._order = self._make_order()
        g = int(np.frombuffer(self._order.read(int(position), 1), dtype=np.int64)[0])
        source = bisect.bisect_right(self._offsets, g) - 1
        return source, g - self._offsets[source]

    def __getitem__(self, position: int):
        source, index = self.locate(int(position))
        return self.sources[source][index]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_order"] = None  # (a native order: each process makes its own)
        return state

    def __repr__(self) -> str:
        return (f"stoker.Mix({len(self.sources)} sources, {self._len} samples an epoch, "
                f"on_exhausted={self.on_exhausted!r})")

    # ---- stoker.DataLoader's view: global indices ----------------------------

    def _epoch_order(self, epoch: int, shuffle: bool):
        """The mixed epoch's order of global indices (an EpochOrder)."""
        return N.lib.mix_order(self.sizes, self.weights, self.seed & 0xFFFF_FFFF_FFFF_FFFF, int(epoch), bool(shuffle),
                               self.epoch_samples or 0, self.on_exhausted == "stop", keys=self.keys or [],
                               shards=_mix_state.shards_arg(self.shards))

    def size_caches(self, shuffle: bool, readers: int) -> None:
        """Sizes each Parquet source's cache of decoded row groups to the
        loader's epochs (ParquetDataset.size_cache; a shuffled source-epoch
        keeps a window of row groups open, as the source's own would)."""
        from stoker.parquet import parquet_source
        for s in self.sources:
            pq = parquet_source(s)
            if pq is not None:
                pq.size_cache(shuffle=shuffle, readers=readers)

    def source_name(self, i: int) -> str:
        """Source i as messages name it."""
        return repr(self.names[i]) if self.names is not None else str(i)

    def _by_index(self):
        """The dataset stoker.DataLoader reads: sample g of the sources laid
        end to end; native when every source is a stoker.io dataset read
        natively with the same fields."""
        if all(isinstance(s, NativeDataset) and getattr(s, "_native_loadable", True) and
               getattr(s, "_transform", None) is None for s in self.sources):
            return _NativeSources(self)
        return _Sources(self)


def _shards_of(sources) -> Optional[list]:
    """Each source's shards, for a shuffle by windows of them: a
    ParquetDataset's (or one mapped from it) row groups and shuffle_window,
    as [window, [rows of each row group]]; None for a source read
    anywhere at the same cost (a global shuffle's reads rows by page); None for all when no source has shards."""
    from stoker.parquet import parquet_source
    out = []
    for s in sources:
        pq = parquet_source(s)
        out.append(None if pq is None or len(pq) != len(s) or pq._native.window == 0 else
                   [int(pq._native.window), [int(n) for _f, n in pq.row_groups]])
    return out if any(x is not None for x in out) else None


class _Sources(_Base):
    """A Mix's sources laid end to end: item g is sample g - offset(i) of
    source i (what MixSampler's indices name)."""

    def __init__(self, mix: Mix):
        self.mix = mix

    def __len__(self) -> int:
        return self.mix._offsets[-1]

    _holds_loader_memory = True  # (stoker.DataLoader: memory_bytes comes out of max_memory)

    @property
    def memory_bytes(self) -> int:
        """What the sources hold of a loader's max_memory: their Parquet
        sources' caches of decoded row groups."""
        from stoker.parquet import parquet_source
        return sum(int(pq.memory_bytes) for pq in map(parquet_source, self.mix.sources) if pq is not None)

    def __getitem__(self, g: int):
        offsets = self.mix._offsets
        source = bisect.bisect_right(offsets, int(g)) - 1
        return self.mix.sources[source][int(g) - offsets[source]]

    def set_epoch(self, epoch: int) -> None:
        for s in self.mix.sources:
            fn = getattr(s, "set_epoch", None)
            if fn is not None:
                fn(epoch)

    def __repr__(self) -> str:
        return f"the sources of {self.mix!r}"


class _NativeSources(NativeDataset, _Sources):
    """_Sources read by C++ threads (MixedDataset, src/io/mixed_dataset.h)."""

    def __init__(self, mix: Mix):
        _Sources.__init__(self, mix)
        self._native = N.lib.NativeDataset.mixed([s._native for s in mix.sources])

    __len__ = NativeDataset.__len__
    __getitem__ = NativeDataset.__getitem__
    set_epoch = NativeDataset.set_epoch
    __repr__ = _Sources.__repr__

    def __reduce__(self):
        return _NativeSources, (self.mix,)


class MixSampler(EpochPasses):
    """The sampler stoker.DataLoader gives a Mix: this rank's part of the
    mixed epoch's global indices (DistributedSampler's split of them), made
    natively.  Each pass is a new epoch unless set_epoch() says which."""

    def __init__(self, mix: Mix, shuffle: bool = False, rank: int = 0, world_size: int = 1, pad: bool = True):
        self.mix, self.shuffle, self.rank, self.world_size, self.pad = mix, bool(shuffle), rank, world_size, pad
        self._stoker_global = None  # the epoch's global order (stoker._topology.EpochPlan reads its counters)

    def __len__(self) -> int:
        return N.lib.samples_per_rank(len(self.mix), self.world_size, self.pad)

    def _stoker_native_order(self):
        epoch = self._begin_epoch()
        from stoker._topology import rank_part
        self._stoker_global = self.mix._epoch_order(epoch, self.shuffle)  # (its counters go in a state)
        return rank_part(self._stoker_global, self.world_size, self.rank, self.pad)

    def _stoker_recipe(self):
        """The global order of the epoch begun (stoker._topology)."""
        m = self.mix
        return dict(kind="mix", n=len(m), sizes=list(m.sizes), weights=list(m.weights),
                    seed=m.seed & 0xFFFF_FFFF_FFFF_FFFF, epoch=self._begun, shuffle=self.shuffle,
                    samples=m.epoch_samples or 0, stop=m.on_exhausted == "stop", keys=m.keys, shards=m.shards,
                    world=self.world_size, rank=self.rank, pad=self.pad)

    def __iter__(self):
        from stoker._sampling import iterate
        return iterate(self._stoker_native_order())

