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
weights) alone, so stoker.DataLoader reads a Mix in position order (its
`shuffle` shuffles each source's samples, not the positions, which would lose
the prefix proportions), and splits, resumes and resumes on another topology
as any map-style dataset of that length.
"""
from __future__ import annotations

import bisect
import itertools
from typing import Optional, Sequence

import numpy as np

from stoker import _native as N

try:
    from torch.utils.data import Dataset as _Base
except ImportError:  # pragma: no cover - numpy-only use
    _Base = object

__all__ = ["Mix"]


class Mix(_Base):
    """Mix(sources, weights, *, seed=0, epoch_samples=None, on_exhausted="cycle")

    sources: map-style datasets (any with __len__ and __getitem__: Python
    Datasets, stoker.io datasets, StreamingDatasets, Mixes), each sample what
    its source returns.  weights: one per source, > 0, normalised.
    epoch_samples: the mixed epoch's length (default: the sum of the sources'
    lengths).  on_exhausted: "cycle" or "stop".  set_epoch(e) (the loader
    calls it in every worker) chooses the epoch's shuffles.
    """

    def __init__(self, sources: Sequence, weights: Sequence[float], *, seed: int = 0,
                 epoch_samples: Optional[int] = None, on_exhausted: str = "cycle"):
        self.sources = list(sources)
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
        self.shuffle = False  # stoker.DataLoader(shuffle=True) sets it
        self.epoch = 0
        self._offsets = list(itertools.accumulate(sizes, initial=0))
        self._order = None
        self._len = len(self._make_order())  # (checks the sizes and weights: the errors are C++'s)

    def _make_order(self):
        return N.lib.mix_order(self.sizes, self.weights, self.seed & 0xFFFF_FFFF_FFFF_FFFF, self.epoch, self.shuffle,
                               self.epoch_samples or 0, self.on_exhausted == "stop")

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
