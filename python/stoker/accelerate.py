"""HF accelerate: keep stoker when `Accelerator.prepare` rebuilds a loader.

`Accelerator().prepare(model, opt, loader)` rebuilds every DataLoader as
accelerate's `DataLoaderShard` around a new `torch.utils.data.DataLoader`:
stoker would be dropped (no stoker workers, no `max_memory`, no `stats()`).
accelerate offers no hook for the loader class it builds, so:

    import stoker.accelerate
    model, opt, loader = stoker.accelerate.prepare(accelerator, model, opt, loader)

does what `accelerator.prepare` does and keeps every stoker.DataLoader a
stoker.DataLoader underneath: accelerate's process sharding (its batch
sampler shard), device placement, gradient accumulation state and
`set_epoch` all work as they do for torch's loader, and the prepared loader
still answers `stats()`, `state_dict()` and `isinstance(x, stoker.DataLoader)`
(accelerate's wrapper delegates both).  `prepare_data_loader(accelerator,
loader)` does one loader.

Without it, a stoker.DataLoader that `accelerator.prepare` rebuilds warns,
naming this module (`DataLoader._warn_if_rebuilt`).
"""
from __future__ import annotations

import contextlib

from stoker.dataloader import DataLoader, accelerate_preparing


def _stoker_loaders(objects):
    return [o for o in objects if isinstance(o, DataLoader)]


@contextlib.contextmanager
def _building_from(sources):
    """While accelerate prepares `sources`, each loader it builds over one of
    their datasets is a stoker.DataLoader with that loader's stoker options
    (accelerate passes the dataset itself, or for an IterableDataset its
    shard wrapper holding it as `.dataset`)."""
    import accelerate.data_loader as adl
    torch_loader = adl.DataLoader
    by_dataset = {}
    for src in sources:
        by_dataset.setdefault(id(src.dataset), src)

    def build(dataset, *args, **kwargs):
        src = by_dataset.get(id(dataset)) or by_dataset.get(id(getattr(dataset, "dataset", None)))
        if src is None:
            return torch_loader(dataset, *args, **kwargs)
        kwargs.update({k: "auto" for k in getattr(src, "_stoker_auto", ())})  # (autotuned: again)
        return type(src)(dataset, *args, **kwargs, **src._stoker_options())

    previous = getattr(accelerate_preparing, "ids", None)
    accelerate_preparing.ids = {id(src) for src in sources}
    adl.DataLoader = build
    try:
        yield
    finally:
        adl.DataLoader = torch_loader
        accelerate_preparing.ids = previous


def prepare_data_loader(accelerator, loader, **kwargs):
    """`accelerator.prepare_data_loader(loader)`, keeping stoker underneath."""
    with _building_from(_stoker_loaders([loader])):
        return accelerator.prepare_data_loader(loader, **kwargs)


def prepare(accelerator, *args, **kwargs):
    """`accelerator.prepare(*args)` (one call, so models, optimizers and
    loaders are prepared together as accelerate wants), keeping every
    stoker.DataLoader among `args` a stoker.DataLoader underneath."""
    with _building_from(_stoker_loaders(args)):
        return accelerator.prepare(*args, **kwargs)
