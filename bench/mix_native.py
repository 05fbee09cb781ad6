"""A Mix of many native sources against one concatenated source (issue 49):
the same records, read by stoker.DataLoader's C++ threads, one epoch each,
alternating, samples/s.  Sources are .npy files of float32 records with
Zipf sizes; the concatenated source is one .npy of all of them, read in
order ("one, in order": batches of adjacent records) and in the mix's order
("one, the mix's order": the same samples in the same order, given as a
native order over the concatenated file: what mixing itself costs).

    python bench/mix_native.py [--sources 1000] [--records 500000] [--width 32] [--rounds 3] [--io pread]
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import stoker


class MixOrderSampler:
    """The mix's order of global indices, over the concatenated source."""

    def __init__(self, mix):
        self.mix = mix

    def __len__(self):
        return len(self.mix)

    def _stoker_native_order(self):
        return self.mix._epoch_order(0, False)

    def __iter__(self):
        from stoker._sampling import iterate
        return iterate(self._stoker_native_order())


def epoch(dataset, batch, sampler=None):
    loader = stoker.DataLoader(dataset, batch_size=batch, num_workers=2, sampler=sampler)
    t = time.perf_counter()
    n = sum(len(b) for b in loader)
    return n, n / (time.perf_counter() - t)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sources", type=int, default=1000)
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--io", default="pread", choices=["pread", "mmap"], help="NpyDataset's io= for every file")
    a = p.parse_args()
    z = 1 / np.arange(1, a.sources + 1) ** 1.1
    sizes = np.maximum(1, (z / z.sum() * a.records).astype(int))
    with tempfile.TemporaryDirectory() as d:
        rows = np.arange(sizes.sum() * a.width, dtype=np.float32).reshape(-1, a.width)
        np.save(os.path.join(d, "all.npy"), rows)
        sources, start = [], 0
        for i, n in enumerate(sizes):
            np.save(os.path.join(d, f"s{i}.npy"), rows[start:start + n])
            sources.append(stoker.io.NpyDataset(os.path.join(d, f"s{i}.npy"), io=a.io))
            start += n
        one = stoker.io.NpyDataset(os.path.join(d, "all.npy"), io=a.io)
        mix = stoker.Mix(sources, z.tolist())
        res = {"one": [], "same": [], "mix": []}
        for _ in range(a.rounds):
            for name, ds, sampler in (("one", one, None), ("same", one, MixOrderSampler(mix)), ("mix", mix, None)):
                n, rate = epoch(ds, a.batch, sampler)
                res[name].append(rate)
        med = {k: statistics.median(v) for k, v in res.items()}
        print(f"{a.sources} sources, {n:,} records of {a.width} float32, batch {a.batch}, 2 reader threads, "
              f"io={a.io}, median of {a.rounds}")
        print(f"| one concatenated source, in order | {med['one']:,.0f} samples/s |")
        print(f"| one concatenated source, the mix's order | {med['same']:,.0f} samples/s |")
        print(f"| Mix of {a.sources} | {med['mix']:,.0f} samples/s ({med['mix'] / med['same']:.2f}x the same order, "
              f"{med['mix'] / med['one']:.2f}x in order) |")


if __name__ == "__main__":
    main()
