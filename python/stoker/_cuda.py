"""pin_memory: the CUDA runtime's entry points it needs, from the libcudart
torch has loaded, as plain addresses for the engine (src/loader/cuda_host.h),
and the fence the iterator records before each batch.

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


def fence(it):
    """pin_memory, before each batch of `it` (a _StokerIter): a CUDA event on
    the loop's current stream.  A batch the loop dropped before this point
    had its copies to the GPU queued before it, so its slot is reused once
    the event is done (src/loader/cuda_host.h)."""
    import torch
    if not it._cuda_on:
        api, where = runtime_api()
        if api is None:
            it._warn_once("pin", f"stoker: pin_memory=True but {where}; batches are not pinned")
            it._pin_memory = False
            return
        it._engine.enable_cuda(api)
        it._cuda_on = True
    err = it._engine.record_fence(torch.cuda.current_stream().cuda_stream)
    if err:
        it._warn_once("fence", f"stoker: recording a CUDA event failed (CUDA error {err}); a dropped "
                      "pinned batch may be reused before the GPU has copied it: call "
                      "torch.cuda.synchronize() before dropping batches")


def pin_failed(it):
    """The engine could not pin a region of `it`'s pool: said once."""
    it._warn_once("pin", f"stoker: cudaHostRegister of a slot's memory failed (CUDA error "
                  f"{it._engine.pin_error}); batches in regions made from now on are not pinned")
