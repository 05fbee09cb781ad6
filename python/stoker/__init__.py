"""stoker: a data-loading engine that keeps accelerators fed.

    from stoker import DataLoader   # drop-in for torch.utils.data.DataLoader

`stoker.DataLoader` needs torch; the rest of the package imports without it.
"""
from __future__ import annotations

import os as _os

from stoker.errors import LoaderTimeout, WorkerCrashed

__version__ = "0.1.0"
__all__ = ["DataLoader", "WorkerCrashed", "LoaderTimeout", "get_worker_info", "DEFAULT_MAX_MEMORY", "Mix", "trace"]


#: For C++ programs: the prefix under which an installed stoker has its CMake
#: package (headers, libstoker.a), as torch.utils.cmake_prefix_path is
#: torch's: cmake -DCMAKE_PREFIX_PATH="$(python -c 'import stoker; print(stoker.cmake_prefix_path)')",
#: then find_package(stoker [COMPONENTS remote vision]) and
#: target_link_libraries(app PRIVATE stoker::core) (docs/cpp_api.md).
cmake_prefix_path = _os.path.dirname(_os.path.abspath(__file__))


def get_worker_info():
    """The current worker's id, num_workers, seed and dataset, or None in the
    main process (torch.utils.data.get_worker_info() works too)."""
    from stoker import _worker_info
    return _worker_info.get()


#: Submodules that `import stoker` makes reachable as attributes
#: (stoker.shared.Array, stoker.io.TFRecordDataset, ...), imported on first use.
_SUBMODULES = ("shared", "io", "streaming", "cache", "distributed", "errors", "accelerate", "vision", "mix", "text")

TORCH_MISSING = ("stoker.DataLoader is built on torch.utils.data.DataLoader and needs PyTorch, also with "
                 "output='numpy': install it with `pip install torch` (or `pip install torch==<version>` to pin "
                 "the build you train with).  Without torch, stoker.io, stoker.streaming and stoker.shared work as "
                 "they are: iterate a stoker.io dataset or call ds[i] for numpy arrays.")


def __getattr__(name):
    if name in ("DataLoader", "DEFAULT_MAX_MEMORY"):
        try:
            from stoker import dataloader
        except ModuleNotFoundError as e:
            if e.name == "torch":
                raise ModuleNotFoundError(TORCH_MISSING, name="torch") from None
            raise
        return getattr(dataloader, name)
    if name == "Mix":
        from stoker.mix import Mix
        return Mix
    if name == "trace":
        from stoker._trace import trace
        return trace
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"stoker.{name}")
    raise AttributeError(f"module 'stoker' has no attribute {name!r}")
