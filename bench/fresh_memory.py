"""What memory costs the first time a process touches it, on this machine.

    python bench/fresh_memory.py [--mib 512] [--rounds 4] [--pages]

Per round: maps --mib MiB of private anonymous memory (huge pages advised,
as the stream buffers are where the host keeps free memory) and writes one
byte per 4 KiB page (the first touch: the kernel finds, zeroes and maps each
page), then writes all of it again (the
same pages: a plain memory write), then gives the pages back to the kernel
(MADV_DONTNEED) and touches them once more (pages the kernel just freed).
Then it waits 3 s, long enough for free pages to be reported to a hypervisor
(virtio-balloon free page reporting), before the next round.  A first touch
much slower than the touch after MADV_DONTNEED is the host backing the
guest's pages again: every buffer, slot or page-cache page a loader makes
fresh pays it (docs/benchmarks.md).

With --pages, each round instead backs --mib MiB twice, in new processes 3 s
apart, as the stream buffers are backed (one MADV_POPULATE_WRITE): once in
huge pages, once in small pages (MADV_NOHUGEPAGE).  On a guest whose host
takes free memory back (free page reporting, core/host_memory.h) the huge
pages come from the blocks the host unmapped.

settle() is the other benchmarks' way to start each side on pages the host
backs (their --settle).
"""
import argparse
import json
import mmap
import subprocess
import sys
import time

import numpy as np


def settle(gib):
    """Touches `gib` GiB of fresh memory and frees it again: on a virtual
    machine whose free memory goes back to the host (virtio-balloon free
    page reporting), the next allocations then find pages the host backs,
    whoever makes them, instead of paying the host's faults at random."""
    if gib:
        np.ones(int(gib * (1 << 30)), dtype=np.uint8)  # (written whole, then freed)


MADV_POPULATE_WRITE = 23  # (Linux 5.14; not among Python 3.11's mmap constants)
# Private memory, as the stream buffers are: mmap's default, shared anonymous
# memory, is tmpfs, which takes no huge pages whatever the advice.
PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS


def back(n, huge):
    """Seconds and CPU-seconds to back n bytes of new memory in one call."""
    m = mmap.mmap(-1, n, flags=PRIVATE)
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    t0, c0 = time.perf_counter(), time.process_time()
    m.madvise(MADV_POPULATE_WRITE)
    return time.perf_counter() - t0, time.process_time() - c0


def compare_pages(args):
    n = args.mib << 20
    for _ in range(args.rounds):
        line = []
        for huge in (True, False):
            out = subprocess.run([sys.executable, __file__, "--back", str(n), str(int(huge))],
                                 capture_output=True, text=True, check=True)
            s, cpu = json.loads(out.stdout)
            line.append(f"{'huge' if huge else 'small'} pages {n / s / 1e9:.2f} GB/s ({cpu / n * 1e9:.2f} CPU-s/GB)")
            time.sleep(3)
        print("; ".join(line), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pages", action="store_true", help="huge against small pages, each backed in one call")
    ap.add_argument("--back", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.back:
        return print(json.dumps(back(args.back[0], bool(args.back[1]))))
    if args.pages:
        return compare_pages(args)
    n = args.mib << 20
    for _ in range(args.rounds):
        m = mmap.mmap(-1, n, flags=PRIVATE)
        m.madvise(mmap.MADV_HUGEPAGE)
        a = np.frombuffer(m, dtype=np.uint8)
        t0, c0 = time.perf_counter(), time.process_time()
        a[::4096] = 1
        t1, c1 = time.perf_counter(), time.process_time()
        a[:] = 2
        t2 = time.perf_counter()
        m.madvise(mmap.MADV_DONTNEED)
        t3 = time.perf_counter()
        a[::4096] = 1
        t4 = time.perf_counter()
        print(f"first touch {n / (t1 - t0) / 1e9:.2f} GB/s ({(c1 - c0) / n * 1e9:.2f} CPU-s/GB); "
              f"written again {n / (t2 - t1) / 1e9:.2f} GB/s; "
              f"touched after MADV_DONTNEED {n / (t4 - t3) / 1e9:.2f} GB/s", flush=True)
        del a
        m.close()
        time.sleep(3)


if __name__ == "__main__":
    main()
