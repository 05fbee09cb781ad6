"""default_collate for output="numpy": torch's rules with numpy arrays in
place of tensors.  Used only for inputs the native collate hands back (odd
types, mismatched shapes), so that their result or error is well defined."""
from __future__ import annotations

import collections.abc

import numpy as np

_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def default_collate(batch):
    elem = batch[0]
    try:
        import torch
        if isinstance(elem, torch.Tensor):
            return np.stack([b.numpy() for b in batch])
    except ImportError:
        pass
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ERR.format(elem.dtype))
        shapes = {b.shape for b in batch}
        if len(shapes) > 1:
            raise RuntimeError(f"stack expects each array to be equal size, but got {sorted(shapes)}")
        return np.stack(batch)
    if isinstance(elem, np.generic):
        return np.asarray(batch)
    if isinstance(elem, float):
        return np.asarray(batch, dtype=np.float64)
    if isinstance(elem, bool) and all(isinstance(b, bool) for b in batch):
        return np.asarray(batch, dtype=np.bool_)
    if isinstance(elem, int):
        return np.asarray(batch, dtype=np.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if len({len(e) for e in batch}) > 1:
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(s) for s in zip(*batch)]
    raise TypeError(_ERR.format(type(elem)))
