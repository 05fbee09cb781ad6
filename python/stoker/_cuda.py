"""The CUDA runtime's entry points that pin_memory needs, from the libcudart
torch has loaded, as plain addresses for the engine (src/loader/cuda_host.h).

stoker links no CUDA: the same build works on machines with and without a
GPU and with any CUDA version torch was built with."""
from __future__ import annotations

import ctypes
import os

NAMES = ("cudaHostRegister", "cudaHostUnregister", "cudaEventCreateWithFlags", "cudaEventRecord",
         "cudaEventQuery", "cudaEventSynchronize", "cudaEventDestroy", "cudaGetLastError")


def _loaded_libraries():
    seen = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[-1].startswith("/") and parts[-1] not in seen:
                seen.append(parts[-1])
    return seen


def runtime_api() -> tuple[dict | None, str]:
    """({name: address}, where) for torch's CUDA runtime, or (None, why not).
    Initialises CUDA (torch.cuda.init)."""
    import torch
    torch.cuda.init()
    libs = _loaded_libraries()
    # The shared libcudart torch loaded, else a library of torch's that links it in.
    candidates = [p for p in libs if "libcudart" in os.path.basename(p)]
    candidates += [p for p in libs if os.path.basename(p).startswith(("libtorch_cuda", "libc10_cuda"))]
    for path in candidates:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        try:
            return {n: ctypes.cast(getattr(lib, n), ctypes.c_void_p).value for n in NAMES}, path
        except AttributeError:
            continue
    return None, "no loaded library exports the CUDA runtime (looked in: " + ", ".join(candidates or ["none"]) + ")"
