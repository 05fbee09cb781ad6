"""stoker's own record of the current worker, for code that runs without torch.
With torch installed, torch.utils.data.get_worker_info() is set as well."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: Any
    rank: int = 0          # this process's rank in a distributed job
    world_size: int = 1


_info: Optional[WorkerInfo] = None


def set(worker_id, num_workers, seed, dataset, rank=0, world_size=1):  # noqa: A001 - module-level setter
    global _info
    _info = WorkerInfo(worker_id, num_workers, seed, dataset, rank, world_size)


def get() -> Optional[WorkerInfo]:
    return _info
