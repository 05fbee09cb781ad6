"""pin_memory on a real GPU: the pool is the pinned memory, a copy to the GPU
queued with non_blocking=True reads the batch it was given even after the
loop dropped it, and the pool is unregistered when it goes.

Needs CUDA: outside the default run (`pytest -m cuda` on a GPU machine; see
docs/memory.md).  The logic without a GPU: tests/unit/cuda_host_test.cc."""
import ctypes
import functools
import gc

import numpy as np
import pytest
import torch

import stoker
from stoker import io

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

NUMEL = 1 << 18  # 1 MiB of float32 per sample


class Filled(torch.utils.data.Dataset):
    """Sample i: NUMEL floats, all i."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": torch.full((NUMEL,), float(i)), "i": i}


def leaves(batch):
    return [batch["x"], batch["i"]]


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_pinned_and_reach_the_gpu_intact(workers):
    kw = dict(batch_size=4, shuffle=True, pin_memory=True)
    ours = stoker.DataLoader(Filled(32), num_workers=workers, generator=torch.Generator().manual_seed(1), **kw)
    ref = torch.utils.data.DataLoader(Filled(32), generator=torch.Generator().manual_seed(1), **kw)
    n = 0
    for a, b in zip(ours, ref):
        assert all(t.is_pinned() for t in leaves(a)), "every tensor of a batch is in pinned memory"
        ga = {k: v.cuda(non_blocking=True) for k, v in a.items()}
        gb = {k: v.cuda(non_blocking=True) for k, v in b.items()}
        torch.cuda.synchronize()
        assert all(torch.equal(ga[k], gb[k]) for k in ga)
        n += 1
    assert n == 8


def check_rows(gpu_batches):
    torch.cuda.synchronize()
    for idx, lo, hi in gpu_batches:
        want = idx.double().cpu()
        assert torch.equal(lo.cpu(), want) and torch.equal(hi.cpu(), want), (
            f"a batch on the GPU holds another batch's bytes: indices {want.tolist()}, "
            f"smallest values {lo.cpu().tolist()}, largest {hi.cpu().tolist()}")


@pytest.mark.parametrize("source", ["python-0", "python-2", "native-2"])
def test_a_copy_queued_behind_slow_gpu_work_reads_the_batch_it_was_given(source, tmp_path):
    # Each step queues ~25 ms of GPU work before its copies and the loop
    # never waits for the GPU: a batch is dropped right after its copy is
    # queued, long before the copy runs, and its slot is soon refilled.
    kind, workers = source.split("-")
    if kind == "native":  # row i: NUMEL floats, all i
        np.repeat(np.arange(96, dtype=np.float32)[:, None], NUMEL, axis=1).tofile(tmp_path / "a.bin")
        ds = io.RawDataset(tmp_path / "a.bin", "float32", (NUMEL,))
    else:
        ds = Filled(96)
    loader = stoker.DataLoader(ds, batch_size=4, num_workers=int(workers), pin_memory=True, max_memory=24 << 20)
    out = []
    for step, batch in enumerate(loader):
        torch.cuda._sleep(50_000_000)
        x = (batch if kind == "native" else batch["x"]).cuda(non_blocking=True)
        del batch
        out.append((expected(step), x.double().amin(1), x.double().amax(1)))
    check_rows(out)


class Varied(torch.utils.data.Dataset):
    """Sample i: 1 to 8 MiB of float32, all i (sizes jump around)."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full(((1 + (i * 5) % 8) << 18,), float(i))


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_that_change_size_in_a_tight_pool_reach_the_gpu_intact(workers):
    # Regions are resized, taken back from idle slots and the pool's free
    # space is given back to the system to stay within max_memory: a range
    # still registered with CUDA would keep its old pages for the GPU while
    # the workers write new ones at the same addresses.
    loader = stoker.DataLoader(Varied(), batch_size=1, num_workers=workers, pin_memory=True,
                               max_memory=40 << 20)
    out = []
    for step, batch in enumerate(loader):
        x = batch.cuda(non_blocking=True)
        del batch
        out.append((torch.full((1,), step, device="cuda"), x.double().amin(1), x.double().amax(1)))
    check_rows(out)


def expected(step):
    """Indices of batch `step` of an unshuffled loader with batch_size=4, on the GPU."""
    return torch.arange(4 * step, 4 * step + 4, device="cuda")


def test_batches_held_a_while_before_their_copy_are_still_safe():
    # Gradient accumulation style: four batches taken, then copied, then dropped.
    loader = stoker.DataLoader(Filled(96), batch_size=4, num_workers=2, pin_memory=True, max_memory=64 << 20)
    out, held = [], []
    for step, batch in enumerate(loader):
        held.append((step, batch))
        if len(held) == 4:
            torch.cuda._sleep(100_000_000)
            for k, b in held:
                x = b["x"].cuda(non_blocking=True)
                out.append((expected(k), x.double().amin(1), x.double().amax(1)))
            held.clear()
    check_rows(out)


def test_copies_on_a_side_stream_the_loop_waits_for_are_safe():
    # The usual prefetcher: copies on a side stream, the main stream waits for it.
    loader = stoker.DataLoader(Filled(96), batch_size=4, num_workers=2, pin_memory=True, max_memory=24 << 20)
    side = torch.cuda.Stream()
    out = []
    for step, batch in enumerate(loader):
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            x = batch["x"].cuda(non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        x.record_stream(torch.cuda.current_stream())
        del batch
        out.append((expected(step), x.double().amin(1), x.double().amax(1)))
    check_rows(out)


@functools.lru_cache(maxsize=None)
def cudart():
    from stoker._cuda import runtime_api
    return ctypes.CDLL(runtime_api()[1])


def registered(address):
    """True when `address` lies in memory registered with CUDA."""
    rt = cudart()
    attrs = (ctypes.c_int * 256)()  # room for cudaPointerAttributes; its first field is the memory type
    err = rt.cudaPointerGetAttributes(attrs, ctypes.c_void_p(address))
    rt.cudaGetLastError()  # an expected failure is not torch's next launch's error
    return err == 0 and attrs[0] != 0  # 0: cudaMemoryTypeUnregistered


@pytest.mark.parametrize("native", [False, True])
def test_the_pool_is_unregistered_when_the_loader_and_its_batches_go(native, tmp_path):
    if native:
        np.arange(64 * NUMEL, dtype=np.float32).reshape(64, NUMEL).tofile(tmp_path / "a.bin")
        ds = io.RawDataset(tmp_path / "a.bin", "float32", (NUMEL,))
    else:
        ds = Filled(64)
    bases = []
    for _epoch in range(3):
        it = iter(stoker.DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, max_memory=64 << 20))
        for _ in range(6):  # the pool has its regions (registering one may wait for the GPU)
            next(it)
        torch.cuda.synchronize()
        batch = next(it)
        base = it._engine.base_address
        torch.cuda._sleep(100_000_000)  # the GPU is busy for a while
        x = (batch if native else batch["x"]).cuda(non_blocking=True)
        del batch
        kept = next(it)
        assert registered((kept if native else kept["x"]).data_ptr())
        assert it.stats()["slots"]["gpu_fenced"] == 1, "the dropped batch waits for its copy"
        torch.cuda.synchronize()
        kept2 = next(it)
        assert it.stats()["slots"]["gpu_fenced"] == 0, "... and no longer once the GPU is past it"
        for _ in it:
            pass
        del it, kept, kept2, x, _
        gc.collect()
        bases.append(base)
    for base in bases:
        for offset in range(0, 64 << 20, 64 << 10):
            assert not registered(base + offset), "a finished loader's pool is still pinned: memory leaks per epoch"


EXITS = r"""
import sys, torch, stoker
sys.path.insert(0, {tests!r})
from test_cuda import Filled
mode = sys.argv[1]
ds = Filled(64)
if mode == "persistent":  # live workers, a held batch and copies in flight at exit
    loader = stoker.DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, persistent_workers=True)
    for epoch in range(2):
        for step, b in enumerate(loader):
            keep = b
            torch.cuda._sleep(20_000_000)
            x = b["x"].cuda(non_blocking=True)
            if epoch == 1 and step == 3:
                break
elif mode == "epochs":  # workers forked again each epoch, after CUDA is up
    loader = stoker.DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
    for epoch in range(4):
        for b in loader:
            x = b["x"].cuda(non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(x[:, 0].cpu(), torch.arange(60, 64).float()), x[:, 0]
elif mode == "exception":
    def train():
        for b in stoker.DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True):
            torch.cuda._sleep(20_000_000)
            b["x"].cuda(non_blocking=True)
            raise ValueError("loss is nan")
    try:
        train()
    except ValueError:
        pass
print("done", flush=True)
"""


@pytest.mark.parametrize("mode", ["persistent", "epochs", "exception"])
def test_a_process_using_pinned_batches_exits_cleanly(mode):
    import os
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", EXITS.format(tests=os.path.dirname(__file__)), mode],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-3000:]
