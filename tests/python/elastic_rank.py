"""Launched by test_elastic_resume.py with the real torchrun (gloo, CPU): one
segment of an epoch on --world ranks.  Each rank builds stoker.DataLoader
(distributed=True, shuffle=True) over a Python dataset, over a native one
(stoker.io.NpyDataset), over a Mix of native sources (mix*.npy) and over a
Pack of a TextDataset (text.jsonl, tok.json: its state gathered over gloo by
state_dict()), loads the state the segment before saved (if any), reads
--stop batches (all that is left without it), and logs every sample it got
(for the Pack, document * 100000 + token of every token); rank 0 then saves
its loaders' states for the next segment."""
import argparse
import os

import numpy as np
import torch
import torch.distributed as dist

import stoker
from stoker import io


class Samples(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--segment", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--stop", type=int, default=-1)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    npy = os.path.join(a.dir, "samples.npy")
    datasets = {"python": Samples(a.samples), "native": io.NpyDataset(npy)}
    parts = sorted(f for f in os.listdir(a.dir) if f.startswith("mix") and f.endswith(".npy"))
    if parts:
        sources = [io.NpyDataset(os.path.join(a.dir, f)) for f in parts]
        datasets["mix"] = stoker.Mix(sources, list(range(1, len(sources) + 1)), seed=2, epoch_samples=a.samples)
    if os.path.exists(os.path.join(a.dir, "text.jsonl")):
        from stoker import text as stoker_text
        text = stoker_text.TextDataset(os.path.join(a.dir, "text.jsonl"), tokenizer=os.path.join(a.dir, "tok.json"))
        datasets["packed"] = stoker_text.Pack(text, 32, "best_fit", eos_id=1, block_documents=16)
    for kind, ds in datasets.items():
        loader = stoker.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, distributed=True,
                                   seed=3)
        state_in = os.path.join(a.dir, f"state_{kind}_{a.segment - 1}.pt")
        if os.path.exists(state_in):
            loader.load_state_dict(torch.load(state_in, weights_only=False))
        got, it = [], iter(loader)
        for k, batch in enumerate(it):
            if kind == "packed":
                d = batch["document_ids"].reshape(-1)
                got += (d[d >= 0] * 100000 + batch["input_ids"].reshape(-1)[d >= 0]).tolist()
            else:
                got += [int(v) for v in np.asarray(batch).reshape(-1)]
            if k + 1 == a.stop:
                break
        state = loader.state_dict()
        del it
        with open(os.path.join(a.dir, f"seen_{kind}_{a.segment}_rank{rank}.txt"), "w") as f:
            f.write(" ".join(map(str, got)))
        if rank == 0:
            torch.save(state, os.path.join(a.dir, f"state_{kind}_{a.segment}.pt"))
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
