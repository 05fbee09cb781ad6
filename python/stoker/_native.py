"""Loads the extension module and registers the Python objects it needs.

The extension is built without torch or numpy headers: it learns their types
and dtype objects here, at import, so one build works with any torch 2.x and
numpy 1.x/2.x, and with neither installed.
"""
from __future__ import annotations

import pickle

from stoker import _pickle
from stoker import _stoker as lib

# The element types the native code knows, by name (DType, shm/batch_format.h).
_DTYPES = lib.DTYPE_NAMES

try:
    import torch
except ImportError:  # pragma: no cover - exercised by the numpy-only path
    torch = None
try:
    import numpy
except ImportError:  # pragma: no cover
    numpy = None

HAVE_TORCH = torch is not None
HAVE_NUMPY = numpy is not None

lib.register("dumps_with_leaves", _pickle.dumps_with_leaves)
lib.register("loads_with_leaves", _pickle.loads_with_leaves)
lib.register("pickle.dumps", pickle.dumps)
lib.register("pickle.loads", pickle.loads)
if torch is not None:
    lib.register("torch.Tensor", torch.Tensor)
    lib.register("torch.strided", torch.strided)
    lib.register("from_dlpack", getattr(torch._C, "_from_dlpack", None) or torch.utils.dlpack.from_dlpack)
    for _name in _DTYPES:
        lib.register("torch." + _name, getattr(torch, _name, None))
if numpy is not None:
    lib.register("numpy.ndarray", numpy.ndarray)
    lib.register("numpy.asarray", numpy.asarray)
    lib.register("numpy.ascontiguousarray", numpy.ascontiguousarray)

Engine = lib.Engine
WorkerPort = lib.WorkerPort

# The codes that cross between C++ and Python as ints, as IntEnums bound from
# the C++ enums (python/bindings/bind_codes.cc): no copies to keep in step.
TaskKind, TaskMsg, SlotResult = lib.TaskKind, lib.TaskMsg, lib.SlotResult
PublishMode, PublishOutcome, PumpCode = lib.PublishMode, lib.PublishOutcome, lib.PumpCode

# STOKER_TRACE=run.json: a trace from here to the process's exit (stoker/_trace.py).
from stoker import _trace  # noqa: E402

_trace.start_from_env(lib)
