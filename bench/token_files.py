"""Token files (issue 50, in part): opening many Megatron .bin/.idx files and
reading their documents with stoker.text.TokenDataset.  Writes --files pairs
of uint16 tokens (documents of 100-2,000 tokens, --tokens in all), then per
round: the time from TokenDataset(...) to the first batch of a shuffled
stoker.DataLoader (no index or cache prepared first), and one epoch's read
rate in tokens/s and bytes/s of the files against one core's memcpy of as
many bytes (the same run).  A read here is the documents as batches of
lists of int64 tensors (the widening included); packing is not in it.

    python bench/token_files.py [--files 1000] [--tokens 1000000000] [--rounds 3] [--dir /var/tmp/stoker-tokens]
"""
import argparse
import os
import statistics
import struct
import time

import numpy as np

import stoker
from stoker.text import TokenDataset


def write(d: str, files: int, tokens: int) -> None:
    rng = np.random.default_rng(0)
    per = tokens // files
    for f in range(files):
        sizes = []
        left = per
        while left > 0:
            n = int(min(left, rng.integers(100, 2000)))
            sizes.append(n)
            left -= n
        sizes = np.array(sizes, np.int32)
        rng.integers(0, 50257, int(sizes.sum()), dtype=np.uint16).tofile(os.path.join(d, f"part{f:04d}.bin"))
        pointers = np.concatenate([[0], np.cumsum(sizes.astype(np.int64) * 2)[:-1]]).astype(np.int64)
        with open(os.path.join(d, f"part{f:04d}.idx"), "wb") as out:
            out.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(sizes), len(sizes) + 1))
            out.write(sizes.tobytes() + pointers.tobytes() + np.arange(len(sizes) + 1, dtype=np.int64).tobytes())


def memcpy_rate(nbytes: int) -> float:
    src = np.ones(min(nbytes, 1 << 26), np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # (its pages faulted in first)
    t = time.perf_counter()
    done = 0
    while done < nbytes:
        np.copyto(dst, src)
        done += len(src)
    return done / (time.perf_counter() - t)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--tokens", type=float, default=1e9)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dir", default="/var/tmp/stoker-tokens")
    a = p.parse_args()
    tokens = int(a.tokens)
    os.makedirs(a.dir, exist_ok=True)
    stamp = os.path.join(a.dir, f"written-{a.files}-{tokens}")
    if not os.path.exists(stamp):
        for f in os.listdir(a.dir):
            os.remove(os.path.join(a.dir, f))
        write(a.dir, a.files, tokens)
        open(stamp, "w").close()
    firsts, rates, copies = [], [], []
    for _ in range(a.rounds):
        t = time.perf_counter()
        ds = TokenDataset(a.dir)
        it = iter(stoker.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=2))
        next(it)
        firsts.append(time.perf_counter() - t)
        del it
        t = time.perf_counter()
        n = sum(int(x.numel()) for b in stoker.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=2)
                for x in b["input_ids"])
        rates.append(n / (time.perf_counter() - t))
        copies.append(memcpy_rate(n * 2))
    rate, copy = statistics.median(rates), statistics.median(copies)
    print(f"{a.files} Megatron files, {ds.tokens:,} uint16 tokens in {len(ds):,} documents, batch {a.batch}, "
          f"2 reader threads, shuffled; median of {a.rounds}")
    print(f"| TokenDataset(...) to the first batch | {statistics.median(firsts) * 1e3:.0f} ms |")
    print(f"| one epoch | {rate / 1e6:,.0f} M tokens/s, {rate * 2 / 1e9:.2f} GB/s of the files |")
    print(f"| one core's memcpy of as many bytes | {copy / 1e9:.2f} GB/s (the epoch: {rate * 2 / copy:.2f}x) |")


if __name__ == "__main__":
    main()
