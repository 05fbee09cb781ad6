"""max_worker_restarts delivers every index exactly once, in order,
while workers are SIGKILLed at random points of the epoch."""
import logging
import os
import random
import signal
import threading
import time

import pytest
import torch

import stoker
from datasets import IndexDataset, ShardedIterable
from leaks import Baseline


class Jittery(IndexDataset):
    """Small random delays, so kills land at every stage of a batch."""

    def __getitem__(self, i):
        if i % 97 == 0:
            time.sleep(0.002)
        return torch.tensor(i)


def kill_randomly(it, kills, stop, seed):
    rng = random.Random(seed)
    done = 0
    while done < kills and not stop.is_set():
        time.sleep(rng.uniform(0.02, 0.15))
        workers = [w for w in it._workers if w is not None and w.pid]
        victim = rng.choice(workers)
        try:
            os.kill(victim.pid, signal.SIGKILL)
            done += 1
        except ProcessLookupError:
            pass
    return done


@pytest.mark.parametrize("shuffle,in_order,seed", [(False, True, 1), (True, True, 2), (True, False, 3)])
def test_random_kills_deliver_each_index_exactly_once(shuffle, in_order, seed, caplog):
    base = Baseline()
    n, bs, kills = 10_000, 10, 5
    gen = torch.Generator().manual_seed(seed)
    loader = stoker.DataLoader(Jittery(n), batch_size=bs, shuffle=shuffle, num_workers=2, generator=gen,
                               in_order=in_order, max_worker_restarts=kills)
    expected = [int(i) for b in torch.utils.data.DataLoader(Jittery(n), batch_size=bs, shuffle=shuffle,
                                                            generator=torch.Generator().manual_seed(seed))
                for i in b]
    stop = threading.Event()
    it = iter(loader)
    got = []
    b = None
    with caplog.at_level(logging.WARNING, logger="stoker"):
        killer = threading.Thread(target=kill_randomly, args=(it, kills, stop, seed))
        killer.start()
        try:
            for b in it:
                got += [int(x) for x in b]
                if len(got) % 500 == 0:
                    time.sleep(0.01)  # give the killer time to act mid-epoch
        finally:
            stop.set()
            killer.join()
    assert len(it.restarts) >= 1, "no worker was killed during the epoch"
    assert sorted(got) == sorted(expected) and len(got) == n, "an index was lost or delivered twice"
    if in_order:
        assert got == expected
    assert sum("starting a replacement" in r.message for r in caplog.records) == len(it.restarts)
    assert all("SIGKILL" in r.message for r in caplog.records if "replacement" in r.message)
    del it, b  # the last batch keeps its slot, and so the arena, alive
    base.assert_clean()


def test_restarts_run_out_then_raise():
    class KillsItself(IndexDataset):
        def __getitem__(self, i):
            if i == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return torch.tensor(i)

    it = iter(stoker.DataLoader(KillsItself(10), batch_size=2, num_workers=2, max_worker_restarts=2))
    with pytest.raises(stoker.WorkerCrashed, match=r"\[2, 3\]"):
        list(it)
    assert len(it.restarts) == 2


def test_restarts_need_a_map_style_dataset():
    with pytest.raises(ValueError, match="map-style"):
        stoker.DataLoader(ShardedIterable(10), batch_size=2, num_workers=2, max_worker_restarts=1)
