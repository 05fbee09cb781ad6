"""Multiple-instance learning with instance sampling shared by all workers.

Every sample is a bag (a slide, a
case) of many instances (tiles); a worker draws k instances of the bag to
form the sample, and no instance may be drawn twice, by any worker, until the
bag is exhausted; then the bag starts over.  The sampling weights come from
the model: after each epoch, the training loop raises the weight of the
instances the model found most telling, and every worker draws with the new
weights from then on.

With torch's DataLoader this needs shared tensors and a Manager().RLock()
(every draw a round trip to a manager process).  Here one
stoker.shared.BagSampler does it, with no lock in Python and no pickling.

    python examples/mil_bag_sampling.py --epochs 5
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn

import stoker
from stoker import shared


class Bags(torch.utils.data.Dataset):
    """Synthetic bags: a bag is positive when it holds "signal" instances."""

    def __init__(self, bags: int, size: int, dim: int, k: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.features = rng.standard_normal((bags, size, dim), dtype=np.float32)
        self.labels = (np.arange(bags) % 2).astype(np.int64)
        signal = rng.standard_normal(dim).astype(np.float32)
        for b in np.flatnonzero(self.labels):  # a quarter of a positive bag's instances carry the signal
            tiles = rng.choice(size, size // 4, replace=False)
            self.features[b, tiles] += 1.5 * signal
        self.sampler = shared.BagSampler([size] * bags, k=k, seed=seed)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, bag):
        picks = self.sampler.draw(bag)  # k instances, never drawn twice in this cycle by any worker
        return self.features[bag, picks], picks, self.labels[bag], bag


class AttentionMIL(nn.Module):
    """Attention pooling over the drawn instances (Ilse et al., 2018)."""

    def __init__(self, dim: int, hidden: int = 32):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.attend = nn.Linear(hidden, 1)
        self.classify = nn.Linear(hidden, 2)

    def forward(self, x):  # x: (batch, k, dim)
        h = self.embed(x)
        a = torch.softmax(self.attend(h).squeeze(-1), dim=1)  # (batch, k)
        return self.classify((a.unsqueeze(-1) * h).sum(1)), a


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--bags", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    torch.manual_seed(0)
    data = Bags(a.bags, a.size, 16, a.k)
    loader = stoker.DataLoader(data, batch_size=10, shuffle=True, num_workers=a.workers, persistent_workers=True)
    model = AttentionMIL(16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    attention = np.zeros((a.bags, a.size))
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        correct = total = 0
        loss_sum = 0.0
        for x, picks, y, bags in loader:
            logits, att = model(x)
            loss = nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(loss) * len(y)
            correct += int((logits.argmax(1) == y).sum())
            total += len(y)
            # Remember how much attention each drawn instance got.
            for b, ps, w in zip(bags.tolist(), picks.tolist(), att.detach().numpy()):
                attention[b, ps] = 0.5 * attention[b, ps] + 0.5 * w
        # From the loss side: the next epoch draws the telling instances
        # more often, in every worker (the weights live in shared memory).
        for b in range(a.bags):
            data.sampler.set_weights(b, 1.0 + 4.0 * attention[b])
        print(f"epoch {epoch}: loss {loss_sum / total:.3f}, accuracy {correct / total:.2f}, "
              f"draws so far {data.sampler.draws}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
