"""Samplers of stoker's own.

ScalableShuffleSampler: a shuffle for any number of samples (10^9 and more:
LLM token windows, web-scale image sets) in memory that does not grow with
it.  Each epoch's order is a keyed pseudo-random permutation of [0, n) with
random access (a Feistel network with cycle-walking, keyed by (seed, epoch):
src/order/feistel_order.h), so nothing is drawn or stored up front, the
first batch is immediate, ranks take their parts by position, and an epoch is
resumed from (seed, epoch, position) alone.  Its order is not torch's: with
the same seed, torch's RandomSampler and this one visit the samples in
different orders.  `stoker.DataLoader(..., shuffle="scalable")` uses it.
See docs/scaling.md for when to choose it.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch

from stoker import _native as N
from stoker._sampling import EpochPasses


class ScalableShuffleSampler(EpochPasses, torch.utils.data.Sampler[int]):
    """A shuffled order of `data_source`'s indices (or of range(n) given an
    int) in O(1) memory.  Each pass is a new epoch (or the one set_epoch()
    set); with num_replicas > 1, rank `rank` takes every num_replicas-th
    place, the order padded by repeating its start (or its tail dropped with
    drop_last), as torch's DistributedSampler does."""

    def __init__(self, data_source, *, seed: int = 0, num_replicas: int = 1, rank: int = 0,
                 drop_last: bool = False):
        n = data_source if isinstance(data_source, int) else len(data_source)
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"ScalableShuffleSampler: the number of samples should be an int >= 0, got {n!r}")
        if not isinstance(num_replicas, int) or num_replicas < 1 or not isinstance(rank, int) or not \
                0 <= rank < num_replicas:
            raise ValueError(f"ScalableShuffleSampler: rank {rank!r} is not in [0, num_replicas={num_replicas!r})")
        self.n, self.seed, self.num_replicas, self.rank, self.drop_last = n, int(seed), num_replicas, rank, drop_last
        self.num_samples = N.lib.samples_per_rank(n, num_replicas, not drop_last)
        self.total_size = self.num_samples * num_replicas

    def __len__(self) -> int:
        return self.num_samples

    def _stoker_native_order(self):
        """This epoch's order (an EpochOrder); the next pass is the next epoch
        unless set_epoch() says otherwise."""
        return self._order(self._begin_epoch())

    def _stoker_recipe(self):
        """The global order of the epoch _stoker_native_order began
        (stoker._topology)."""
        return dict(kind="feistel", n=self.n, seed=self.seed & 0xFFFF_FFFF_FFFF_FFFF, epoch=self._begun,
                    world=self.num_replicas, pad=not self.drop_last)

    def _order(self, epoch: int):
        order = N.lib.feistel_order(self.n, self.seed & 0xFFFF_FFFF_FFFF_FFFF, epoch)
        if self.num_replicas > 1:
            order = N.lib.strided_rank_order(order, self.total_size, self.rank, self.num_replicas)
        return order

    def index(self, position: int, epoch: Optional[int] = None) -> int:
        """The index at `position` of this rank's order in `epoch` (default:
        the next pass's), computed alone (O(1))."""
        import numpy as np
        order = self._order(self.epoch if epoch is None else epoch)
        return int(np.frombuffer(order.read(position, 1), dtype=np.int64)[0])

    def __iter__(self) -> Iterator[int]:
        from stoker._sampling import iterate
        return iterate(self._stoker_native_order())
