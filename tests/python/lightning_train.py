"""Run by test_integrations.py: a tiny LightningModule trained with DDP on two
CPU processes, its loader a stoker.DataLoader (Lightning rebuilds it with a
DistributedSampler).  Modes:
  full OUT            two epochs; each rank writes what each step saw
  interrupt OUT CKPT  saves a checkpoint after step STOP_AT of epoch 0 and stops
  resume OUT CKPT     resumes from that checkpoint to the end
A sample is its index and a random draw from the worker's torch stream (an
augmentation), so a resumed run must equal the uninterrupted one in both."""
import json
import os
import sys

import lightning as L
import torch

import stoker

STOP_AT = 5


class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        info = stoker.get_worker_info()
        return torch.tensor([float(i), float(torch.randint(1 << 20, ())), float(info.id if info else -1)])


class Model(L.LightningModule):
    def __init__(self, out_dir, stop_at=None, ckpt=None):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.out_dir, self.stop_at, self.ckpt = out_dir, stop_at, ckpt
        self.seen = []

    def training_step(self, batch, batch_idx):
        self.seen.append({"epoch": self.current_epoch, "step": batch_idx, "items": batch[:, :2].long().tolist(),
                          "workers": sorted(set(batch[:, 2].long().tolist())),
                          "loader": type(self.trainer.train_dataloader).__module__})
        return self.lin(batch[:, :1] / 64).pow(2).mean()

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.stop_at is not None and self.current_epoch == 0 and batch_idx == self.stop_at:
            self.trainer.save_checkpoint(self.ckpt)
            self.trainer.should_stop = True

    def on_train_end(self):
        with open(os.path.join(self.out_dir, f"rank-{self.global_rank}.json"), "w") as f:
            json.dump(self.seen, f)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        return stoker.DataLoader(Items(), batch_size=4, shuffle=True, num_workers=2, max_memory=32 << 20)


def main(mode, out_dir, ckpt=None):
    L.seed_everything(11, workers=True)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    model = Model(out_dir, stop_at=STOP_AT if mode == "interrupt" else None, ckpt=ckpt)
    trainer.fit(model, ckpt_path=ckpt if mode == "resume" else None)


if __name__ == "__main__":
    main(*sys.argv[1:])
