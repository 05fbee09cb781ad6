"""What an epoch's end costs the training loop: the time from the last batch
to the end of the `for` loop (StopIteration: the workers told to leave, the
loader's last statistics kept) with non-persistent workers, in a process
that holds --gib GiB of memory in small pages, as a training job holding a
dataset or a model in host memory does (a forked worker maps it too).

    python bench/epoch_end.py [--gib 1] [--workers 4] [--epochs 3] [--with-memory]

--with-memory keeps the last statistics the way they used to be kept, with
every process's RSS/PSS/USS read from /proc/<pid>/smaps_rollup (a walk of
its page tables) as the iterator ends."""
import argparse
import mmap
import time

import torch
from torch.utils.data import Dataset

import stoker
from stoker import _loader_iter


class Small(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.zeros(16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--with-memory", action="store_true")
    a = ap.parse_args()
    held = mmap.mmap(-1, a.gib << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    held.madvise(mmap.MADV_NOHUGEPAGE)
    for off in range(0, a.gib << 30, 4096):
        held[off] = 1
    if a.with_memory:
        real = _loader_iter._StokerIter.stats
        _loader_iter._StokerIter.stats = lambda self, memory=True: real(self, True)
    loader = stoker.DataLoader(Small(), batch_size=8, num_workers=a.workers)
    ends = []
    for _ in range(a.epochs):
        for _ in loader:
            last = time.perf_counter()
        ends.append(1e3 * (time.perf_counter() - last))
    print(f"{a.gib} GiB in small pages, {a.workers} workers{', memory read at the end' if a.with_memory else ''}: "
          f"last batch to the loop's end, ms per epoch: {' '.join(f'{x:.1f}' for x in ends)}")


if __name__ == "__main__":
    main()
