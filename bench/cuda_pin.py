"""pin_memory on a GPU: stoker against torch.utils.data.DataLoader, same run.

    python bench/cuda_pin.py --batches 200

Both load uint8 images (3x224x224, batch 256: 38.5 MB a batch) from an
in-memory array with pin_memory=True and --workers workers, and the loop
copies each batch to the GPU with non_blocking=True and reduces it there (a
stand-in for a training step that reads its input once):
  torch:  workers collate into shared memory, the main process's pin thread
          copies each batch once more into pinned memory;
  stoker: workers collate straight into the slot pool, which is registered
          with CUDA: the copy to the GPU reads the slot (and the pool's
          fences keep a dropped batch's slot until its copy is done).
Reports batches/s and host-to-device GB/s for each, their ratio, and the
bandwidth of one pinned-to-device copy of a batch (the ceiling).  Needs CUDA.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import stoker


class Images(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, 256, (min(n, 1024), 3, 224, 224), dtype=torch.uint8, generator=g)
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.data[i % len(self.data)], i


def run(make, batches, warmup):
    loader = make()
    it = iter(loader)
    acc = torch.zeros((), device="cuda", dtype=torch.float64)
    nbytes = 0
    t0 = None
    for k in range(warmup + batches):
        if k == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        x, i = next(it)
        nbytes += x.numel() if k >= warmup else 0
        gx = x.cuda(non_blocking=True)
        gi = i.cuda(non_blocking=True)
        del x, i
        acc += gx.float().mean() + gi.sum()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    del it
    return batches / dt, nbytes / dt / 1e9


def copy_ceiling(batch_bytes):
    src = torch.empty(batch_bytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(batch_bytes, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    return 20 * batch_bytes / (time.perf_counter() - t0) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/cuda_pin.py needs a CUDA device")
    n = (a.batches + a.warmup) * a.batch_size
    kw = dict(batch_size=a.batch_size, num_workers=a.workers, pin_memory=True, shuffle=True)
    makers = {"torch": lambda: torch.utils.data.DataLoader(Images(n), **kw),
              "stoker": lambda: stoker.DataLoader(Images(n), **kw)}
    res = {k: [] for k in makers}
    for _ in range(a.rounds):  # alternate, so drift hits both
        for name, make in makers.items():
            res[name].append(run(make, a.batches, a.warmup))
    med = {k: sorted(v)[len(v) // 2] for k, v in res.items()}
    ceiling = copy_ceiling(a.batch_size * 3 * 224 * 224)
    print(f"{torch.cuda.get_device_name()}, {a.workers} workers, batch {a.batch_size} x 3x224x224 uint8, "
          f"{a.batches} batches, median of {a.rounds} rounds")
    print(f"{'loader':8} {'batches/s':>10} {'H2D GB/s':>9}")
    for k, (bps, gbs) in med.items():
        print(f"{k:8} {bps:10.1f} {gbs:9.2f}")
    print(f"stoker / torch: {med['stoker'][0] / med['torch'][0]:.2f}x; one pinned copy alone: {ceiling:.1f} GB/s")
    print(json.dumps({"rounds": res, "ratio": med["stoker"][0] / med["torch"][0], "copy_gbs": ceiling}))


if __name__ == "__main__":
    main()
