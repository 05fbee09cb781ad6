"""Pickling with tensors and arrays carried out of band.

Objects that are neither tensors, arrays nor plain containers (a user
collate_fn's custom batch class, an OrderedDict, a dataclass) cross from a
worker to the main process as a pickle stored in the slot.  Tensors and numeric
arrays inside them are not pickled: `dumps_with_leaves` replaces each with a
persistent id and returns it as a leaf, which the native code writes into the
slot like any other tensor; `loads_with_leaves` puts zero-copy views back.
"""
from __future__ import annotations

import io
import pickle

_LEAF_KINDS = set("biufc")

try:  # torch is optional for the numpy-only path
    import torch as _torch
except ImportError:  # pragma: no cover
    _torch = None
try:
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


def _is_leaf(obj) -> bool:
    if _torch is not None and isinstance(obj, _torch.Tensor):
        return obj.device.type == "cpu" and obj.layout == _torch.strided and not obj.is_nested
    if _np is not None and type(obj) is _np.ndarray:
        return obj.dtype.kind in _LEAF_KINDS and obj.dtype.isnative
    return False


class _LeafPickler(pickle.Pickler):
    def __init__(self, f, leaves):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self._leaves = leaves

    def persistent_id(self, obj):
        if _is_leaf(obj):
            self._leaves.append(obj)
            return len(self._leaves) - 1
        return None


class _LeafUnpickler(pickle.Unpickler):
    def __init__(self, f, leaves):
        super().__init__(f)
        self._leaves = leaves

    def persistent_load(self, pid):
        return self._leaves[pid]


def dumps_with_leaves(obj):
    leaves: list = []
    buf = io.BytesIO()
    _LeafPickler(buf, leaves).dump(obj)
    return buf.getvalue(), leaves


def loads_with_leaves(data, leaves):
    return _LeafUnpickler(io.BytesIO(data), leaves).load()
