"""Memory over many epochs: does anything grow?

    python bench/soak.py --epochs 50 --mode persistent
    python bench/soak.py --epochs 50 --mode fresh

A dataset that keeps its metadata the recommended way (names in a
stoker.shared.StringList, labels in a stoker.shared.Array) and returns
samples of varying size (16-48 KiB, so the pool's regions are resized now and
then), shuffled, 2 workers, batch 32, with `persistent_workers` (one set of
workers for every epoch) or fresh workers each epoch.  After every epoch it
records the process tree's PSS (sum over main + live workers, so shared
pages count once) and the system's Shmem (/proc/meminfo).  Prints one JSON
line: the per-epoch series and the largest relative change against epoch 1.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys


class SoakDataset:
    def __init__(self, n):
        from stoker import shared
        self.names = shared.StringList(f"shard-{i // 1000:04d}/sample-{i:08d}.bin" for i in range(n))
        self.labels = shared.Array((n,), "int64")
        self.labels.numpy()[:] = [i % 1000 for i in range(n)]

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        import torch
        name = self.names[i]
        size = 4096 + 1024 * (len(name) + i % 32) // 4  # 16-48 KiB of float32
        return {"x": torch.full((size,), float(i % 97)), "y": int(self.labels[i])}


def pad_collate(samples):
    import torch
    width = max(s["x"].numel() for s in samples)
    x = torch.zeros(len(samples), width)
    for k, s in enumerate(samples):
        x[k, : s["x"].numel()] = s["x"]
    return {"x": x, "y": torch.tensor([s["y"] for s in samples])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--mode", choices=["persistent", "fresh"], default="persistent")
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)

    import torch
    import stoker
    from stoker import _native as N
    from stoker.bench.memory import tree_pss

    torch.manual_seed(0)
    ds = SoakDataset(a.samples)
    loader = stoker.DataLoader(ds, batch_size=32, shuffle=True, num_workers=a.workers, collate_fn=pad_collate,
                               persistent_workers=a.mode == "persistent", max_memory=64 << 20)
    pss, shmem, arena = [], [], []
    checksum = 0.0
    for _epoch in range(a.epochs):
        it = iter(loader)
        seen = 0
        for b in it:
            seen += b["y"].numel()
            checksum += float(b["x"][:, 0].sum())
        assert seen == a.samples, f"epoch {_epoch}: {seen} samples of {a.samples}"
        arena.append(it.stats(memory=False)["arena_bytes"])
        del b, it
        gc.collect()
        pss.append(tree_pss())
        shmem.append(N.lib.system_shmem())
    worst_pss = max(abs(v / pss[0] - 1) for v in pss)
    worst_shmem = max(abs(v - shmem[0]) for v in shmem)
    print(json.dumps({"mode": a.mode, "epochs": a.epochs, "pss": pss, "shmem": shmem, "arena_bytes": arena,
                      "worst_pss_change": worst_pss, "worst_shmem_change_bytes": worst_shmem,
                      "worst_shmem_change": worst_shmem / max(shmem[0], 1), "checksum": checksum}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
