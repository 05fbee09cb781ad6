"""Launched by test_torchrun.py with the real torchrun (2 ranks, gloo, CPU):
trains a tiny DDP model with stoker.DataLoader(distributed=True) and logs
every sample each rank consumes.  Every --ckpt-every steps each rank saves
its own checkpoint (model, optimizer, its loader's state) for that step, and
drops its older ones once every rank has saved the new one (a barrier).
With --kill-at S, rank 0 SIGKILLs the whole job (torchrun, both ranks, their
loader workers) at step S; with --resume, each rank continues from the
newest step that every rank saved."""
import argparse
import glob
import os
import re
import signal

import torch
import torch.distributed as dist
from torch import nn

import stoker


class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return i, torch.randn(8, generator=g), torch.tensor(float(i % 2))


def saved_steps(directory, rank):
    return {int(m.group(1)) for f in glob.glob(os.path.join(directory, f"ckpt_rank{rank}_step*.pt"))
            if (m := re.search(r"_step(\d+)\.pt$", f))}


def complete_step(directory, world):
    """The newest step every rank has a checkpoint of."""
    common = set.intersection(*(saved_steps(directory, r) for r in range(world)))
    return max(common)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--ckpt-every", type=int, default=3)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--resume", action="store_true")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = stoker.DataLoader(Samples(), batch_size=4, shuffle=True, num_workers=2, distributed=True, seed=1,
                               persistent_workers=True)
    def ckpt_path(step):
        return os.path.join(a.dir, f"ckpt_rank{rank}_step{step}.pt")

    start_epoch, step = 0, 0
    if a.resume:
        ck = torch.load(ckpt_path(complete_step(a.dir, dist.get_world_size())), weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        loader.load_state_dict(ck["loader"])
        start_epoch, step = ck["epoch"], ck["step"]
    log = open(os.path.join(a.dir, f"samples_rank{rank}{'_resumed' if a.resume else ''}.log"), "w", buffering=1)
    for epoch in range(start_epoch, a.epochs):
        if not (a.resume and epoch == start_epoch):
            loader.set_epoch(epoch)  # on resume, load_state_dict set it (and where in it we are)
        for idx, x, y in loader:
            loss = nn.functional.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            log.write(f"{step} {epoch} {' '.join(str(int(i)) for i in idx)}\n")
            if step == a.kill_at and rank == 0:
                os.killpg(os.getpgid(0), signal.SIGKILL)  # the node goes down: everything at once
            if step % a.ckpt_every == 0:
                tmp = ckpt_path(step) + ".tmp"
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loader": loader.state_dict(),
                            "epoch": epoch, "step": step}, tmp)
                os.replace(tmp, ckpt_path(step))
                dist.barrier()  # every rank has saved this step: the older ones can go
                for old in saved_steps(a.dir, rank) - {step}:
                    os.remove(ckpt_path(old))
    log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
