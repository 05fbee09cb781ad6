"""loader.stats() and progress=True: memory, slots, queues, throughput."""
import sys
import time

import pytest
import torch
from torch.utils.data import Dataset

import stoker
from datasets import BigDataset


class Slow(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.full((1024,), float(i))


def test_stats_show_memory_by_process_and_by_slot_state():
    loader = stoker.DataLoader(BigDataset(64, 4096), batch_size=4, num_workers=2, max_memory=32 << 20,
                               prefetch_factor=2)
    assert loader.stats() == {}, "no iterator yet"
    it = iter(loader)
    held = [next(it) for _ in range(3)]
    st = loader.stats()
    assert st["max_memory"] == 32 << 20 and 0 < st["budget_bytes"] < st["max_memory"]
    assert 0 < st["arena_bytes"] <= st["max_memory"]
    assert st["slots"]["held"] == 3 and st["slot_bytes"]["held"] >= 3 * 4 * 4096 * 4
    assert sum(st["slot_bytes"].values()) == st["resident_bytes"]
    assert len(st["workers"]) == 2
    for w in st["workers"] + [st["main"]]:
        assert 0 < w["uss"] <= w["pss"] <= w["rss"], w
    assert st["tree_pss"] == st["main"]["pss"] + sum(w["pss"] for w in st["workers"])
    q = st["queues"]
    assert set(q) == {"in_progress", "reorder_buffer", "spilled", "retry", "per_worker"}
    assert q["in_progress"] + q["reorder_buffer"] <= 2 * 2
    assert st["throughput"]["batches"] == 3
    del held
    assert loader.stats()["slots"]["held"] == 0
    fast = loader.stats(memory=False)
    assert "tree_pss" not in fast and fast["workers"][0]["pss"] == 0
    for _ in it:
        pass


def test_an_epochs_end_reads_no_process_memory_and_stats_after_it_read_main_then(monkeypatch):
    # The snapshot the loader keeps as an iterator ends is taken without the
    # /proc reads (each walks a process's page tables: 42-126 ms at every
    # epoch's end with 4 workers of a 1-4 GiB process); main's memory is
    # read when stats() is asked for afterwards.
    from stoker import _loader_iter
    asked = []
    real = _loader_iter._StokerIter.stats

    def spy(self, memory=True):
        asked.append(memory)
        return real(self, memory)

    monkeypatch.setattr(_loader_iter._StokerIter, "stats", spy)
    loader = stoker.DataLoader(BigDataset(16, 64), batch_size=4, num_workers=2)
    assert sum(1 for _ in loader) == 4
    assert asked == [False], "the epoch's end asked for the workers' and main's memory"
    st = loader.stats()
    assert st["delivered_batches"] == 4 and len(st["workers"]) == 2
    assert 0 < st["main"]["uss"] <= st["main"]["pss"] <= st["main"]["rss"]
    assert st["tree_pss"] == st["main"]["pss"]
    assert all(w["pss"] == 0 for w in st["workers"]), "the workers are gone"
    fast = loader.stats(memory=False)
    assert "tree_pss" not in fast and fast["main"]["pss"] == 0


def test_busy_fraction_stall_and_rates():
    it = iter(stoker.DataLoader(Slow(), batch_size=4, num_workers=2))
    n = sum(1 for _ in it)
    st = it.stats()
    t = st["throughput"]
    assert t["batches"] == n == 16
    assert t["batches_per_s"] > 0 and t["bytes_per_s"] >= 16 * 4 * 4096 / t["elapsed_s"] * 0.99
    assert 0.5 < t["stall_fraction"] <= 1.0, "a loop that only waits for slow samples is stalled"
    assert t["stall_s"] <= t["elapsed_s"]
    for w in st["workers"]:
        assert 0.1 < w["busy_fraction"] <= 1.0, w  # start-up counts as time alive, not busy
        assert w["batches"] >= 1 and w["busy_s"] >= w["batches"] * 4 * 0.004  # 4 ms per sample, 4 per batch
    assert sum(w["batches"] for w in st["workers"]) == 16  # least loaded first: not always 8 each


def test_stats_for_in_process_loading():
    it = iter(stoker.DataLoader(BigDataset(8, 16), batch_size=2))
    list(it)
    st = it.stats()
    assert st["workers"] == [] and st["throughput"]["batches"] == 4 and st["delivered_batches"] == 4


def test_progress_with_tqdm(capsys):
    pytest.importorskip("tqdm")
    from stoker import _progress
    _progress.Progress.INTERVAL_S = 0.0
    try:
        assert len(list(stoker.DataLoader(BigDataset(16, 64), batch_size=4, num_workers=2, progress=True))) == 4
    finally:
        _progress.Progress.INTERVAL_S = 0.5
    err = capsys.readouterr().err
    assert "4/4" in err and "batch/s" in err and "stall" in err and "shm" in err and "PSS" in err, err


def test_progress_without_tqdm(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    from stoker import _progress
    monkeypatch.setattr(_progress.Progress, "INTERVAL_S", 0.0)
    assert len(list(stoker.DataLoader(BigDataset(16, 64), batch_size=4, num_workers=0, progress=True))) == 4
    err = capsys.readouterr().err
    assert "stoker: 4/4 batches" in err and "MB/s" in err and err.endswith("\n"), err


def _in_flight_after_a_pause(loader):
    it = iter(loader)
    first = [next(it), next(it)]  # (the depth is chosen at the first; the second sends out more)
    time.sleep(0.5)  # the workers fill what they may
    q = loader.stats(memory=False)["queues"]
    del first, it
    return q["in_progress"] + q["reorder_buffer"]


def test_small_batches_load_further_ahead_when_prefetch_factor_is_left_to_stoker():
    small = BigDataset(400, 16)  # 256-byte batches
    assert _in_flight_after_a_pause(stoker.DataLoader(small, batch_size=4, num_workers=2)) > 2 * 2
    assert _in_flight_after_a_pause(stoker.DataLoader(small, batch_size=4, num_workers=2)) <= 32 * 2
    # prefetch_factor given: torch's depth, as asked.
    assert _in_flight_after_a_pause(stoker.DataLoader(small, batch_size=4, num_workers=2, prefetch_factor=2)) <= 2 * 2
    # Batches of an eighth of the budget for two workers: torch's depth.
    big = BigDataset(40, 256 << 10)  # 4 MiB batches, 32 MiB budget
    assert _in_flight_after_a_pause(stoker.DataLoader(big, batch_size=4, num_workers=2, max_memory=32 << 20)) <= 2 * 2
