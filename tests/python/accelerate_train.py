"""Run by test_integrations.py under `torchrun --nproc_per_node=2`: a tiny model
trained with HF accelerate on CPU (gloo), its loader a stoker.DataLoader kept
by stoker.accelerate.prepare.  Each rank writes what it saw to OUT/rank-R.json."""
import json
import os
import sys

import torch
from accelerate import Accelerator

import stoker
import stoker.accelerate


class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        info = stoker.get_worker_info()
        return torch.tensor([float(i), float(os.getpid()), float(info.id if info is not None else -1)])


def main(out_dir):
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = stoker.DataLoader(Items(), batch_size=4, shuffle=True, num_workers=2, max_memory=32 << 20,
                               generator=torch.Generator().manual_seed(3))
    model, opt, loader = stoker.accelerate.prepare(acc, model, opt, loader)
    seen = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        for batch in loader:
            loss = model(batch[:, :1] / 96).pow(2).mean()
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            seen.append({"epoch": epoch, "indices": batch[:, 0].long().tolist(),
                         "pids": sorted(set(batch[:, 1].long().tolist())),
                         "workers": sorted(set(batch[:, 2].long().tolist())), "device": str(batch.device)})
    st = loader.stats()
    with open(os.path.join(out_dir, f"rank-{acc.process_index}.json"), "w") as f:
        json.dump({"rank": acc.process_index, "world": acc.num_processes, "pid": os.getpid(), "seen": seen,
                   "is_stoker": isinstance(loader, stoker.DataLoader), "max_memory": st.get("max_memory"),
                   "distributed_type": str(acc.distributed_type)}, f)


if __name__ == "__main__":
    main(sys.argv[1])
