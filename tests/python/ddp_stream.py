"""Launched by test_streaming.py with the real torchrun (2 ranks, gloo, CPU):
both ranks read one growing StreamingDataset (one shared cache directory)
through stoker.DataLoader(distributed=True) while the cache fills, and log
per epoch the epoch's shards and the ids each rank got."""
import argparse
import json
import os
import time

import torch.distributed as dist

import stoker
from stoker.cache import StreamingDataset

ap = argparse.ArgumentParser()
ap.add_argument("--url")
ap.add_argument("--cache")
ap.add_argument("--out")
ap.add_argument("--epochs", type=int, default=4)
args = ap.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
ds = StreamingDataset(args.url, args.cache, 1 << 30, mode="cached", features={"x": ("float32", (256,)), "y": ("int64", ())})
loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=1, distributed=True)
log = []
for epoch in range(args.epochs):
    loader.set_epoch(epoch)
    ys = [y for b in loader for y in b["y"].tolist()]
    log.append({"epoch": epoch, "shards": ds.epoch_shards, "ys": ys})
    time.sleep(0.3 * (rank + 1))  # the ranks drift apart; the cache grows meanwhile
with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
    json.dump(log, f)
dist.destroy_process_group()
