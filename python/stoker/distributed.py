"""Ranks: which part of the data this process reads.

`stoker.DataLoader(..., distributed=True)` shards a map-style dataset across
the ranks of a job in exactly torch's DistributedSampler order (deterministic
global shuffle per epoch from `seed` + `set_epoch`, an even split by padding
or dropping; drawn natively, see ShardedSampler), taking the rank and world size from an initialized
torch.distributed or from the RANK / WORLD_SIZE environment (torchrun sets
both).  An IterableDataset splits its own stream: `shard(items)` gives this
rank's and this worker's share of a list of shards or items.
"""
from __future__ import annotations

import functools

import os
from typing import Sequence, Tuple, TypeVar

T = TypeVar("T")


def rank_and_world_size() -> Tuple[int, int]:
    """(rank, world size) of this process: torch.distributed's when it is
    initialized, else RANK / WORLD_SIZE from the environment, else (0, 1)."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:  # pragma: no cover - torch-free use
        pass
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ValueError(f"RANK={os.environ.get('RANK')!r} and WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} "
                         "must be integers") from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} is not in [0, WORLD_SIZE={world})")
    return rank, world


@functools.lru_cache(maxsize=None)
def _sharded_sampler_class():
    import torch
    from torch.utils.data import DistributedSampler

    class ShardedSampler(DistributedSampler):
        """torch's DistributedSampler, same order for the same seed and epoch,
        without its per-epoch Python list of every index: shuffled, the
        permutation is torch's randperm drawn natively
        (stoker._sampling) and read a chunk at a time; stoker.DataLoader
        hands it to its workers with no Python per index."""

        _stoker_sharded = True

        def __iter__(self):
            from stoker import _sampling
            order = _sampling.native_epoch(self)
            if order is not None:
                return _sampling.iterate(order)
            n = len(self.dataset)
            positions = torch.arange(self.rank, self.total_size, self.num_replicas)
            # Padding repeats the order from its start, as DistributedSampler does.
            return iter(torch.arange(n)[positions % n].tolist() if n else [])

    return ShardedSampler


def __getattr__(name):
    # stoker.distributed.ShardedSampler, made on first use (it needs torch;
    # the rest of this module does not).
    if name == "ShardedSampler":
        return _sharded_sampler_class()
    raise AttributeError(f"module 'stoker.distributed' has no attribute {name!r}")


def sharded_sampler(dataset, num_replicas: int, rank: int, shuffle: bool, seed: int, drop_last: bool):
    """The sampler of `distributed=True` for a map-style dataset."""
    return _sharded_sampler_class()(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed,
                                    drop_last=drop_last)


def shard(items: Sequence[T]) -> Sequence[T]:
    """This rank's and this worker's share of `items` (shard files, sample
    ids): items[g::n] with g = rank * num_workers + worker id and n = world
    size * num_workers.  Call it inside IterableDataset.__iter__."""
    from stoker import _worker_info
    info = _worker_info.get()
    if info is None:
        rank, world = rank_and_world_size()
        worker, workers = 0, 1
    else:
        rank, world, worker, workers = info.rank, info.world_size, info.id, info.num_workers
    return items[rank * workers + worker::world * workers]
