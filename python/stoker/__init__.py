"""stoker: a data-loading engine that keeps accelerators fed.

    from stoker import DataLoader   # drop-in for torch.utils.data.DataLoader

`stoker.DataLoader` needs torch; the rest of the package imports without it.
"""
from __future__ import annotations

from stoker.errors import LoaderTimeout, WorkerCrashed

__version__ = "0.1.0"
__all__ = ["DataLoader", "WorkerCrashed", "LoaderTimeout", "get_worker_info", "DEFAULT_MAX_MEMORY"]


def get_worker_info():
    """The current worker's id, num_workers, seed and dataset, or None in the
    main process (torch.utils.data.get_worker_info() works too)."""
    from stoker import _worker_info
    return _worker_info.get()


def __getattr__(name):
    if name in ("DataLoader", "DEFAULT_MAX_MEMORY"):
        from stoker import dataloader
        return getattr(dataloader, name)
    raise AttributeError(f"module 'stoker' has no attribute {name!r}")
