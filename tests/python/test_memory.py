"""Zero-copy batches and the byte-bounded slot pool."""
import re
import time
import warnings

import numpy as np
import pytest
import torch

import stoker
from datasets import BigDataset, IndexDataset, custom_collate


def in_arena(it, t):
    return it._engine.contains(t.data_ptr(), t.numel() * t.element_size())


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batches_are_views_of_the_arena(num_workers):
    loader = stoker.DataLoader(BigDataset(16, 1000), batch_size=4, num_workers=num_workers)
    it = iter(loader)
    for b in it:
        assert in_arena(it, b), "batch memory is not inside the slot arena"


def test_no_pickling_of_tensor_batches():
    def forbid_pickling(_):
        def refuse(self, *a, **k):
            raise AssertionError("a tensor was pickled")
        torch.Tensor.__reduce_ex__ = refuse

    loader = stoker.DataLoader(BigDataset(12, 64), batch_size=3, num_workers=2, worker_init_fn=forbid_pickling)
    assert sum(b.shape[0] for b in loader) == 12


def test_custom_batch_tensors_are_zero_copy_too():
    it = iter(stoker.DataLoader(IndexDataset(12), batch_size=4, num_workers=2, collate_fn=custom_collate))
    for b in it:
        assert in_arena(it, b.x)


def test_numpy_output():
    it = iter(stoker.DataLoader(BigDataset(8, 10), batch_size=4, num_workers=2, output="numpy"))
    b = next(it)
    assert isinstance(b, np.ndarray) and b.shape == (4, 10) and b.dtype == np.float32
    assert it._engine.contains(b.ctypes.data, b.nbytes)
    assert np.array_equal(b[:, 0], np.arange(4, dtype=np.float32))


def test_slot_returns_to_free_list_when_last_view_dies():
    it = iter(stoker.DataLoader(BigDataset(64, 1000), batch_size=4, num_workers=2))
    b = next(it)
    view = b[1:3]  # a view keeps the slot alive too
    del b
    assert it.stats()["slots"]["held"] == 1
    del view
    assert it.stats()["slots"]["held"] == 0
    for _ in it:
        pass


def test_prefetch_is_bounded_in_batches():
    loader = stoker.DataLoader(BigDataset(200, 100), batch_size=2, num_workers=2, prefetch_factor=3)
    it = iter(loader)
    worst = 0
    for b in it:
        s = it.stats()["slots"]
        worst = max(worst, s["queued"] + s["filling"] + s["ready"])
    assert 0 < worst <= 3 * 2


def test_loop_holding_three_times_the_pool_finishes_with_a_warning():
    # 64 KiB batches, a 1 MiB pool: keeping 48 batches alive is 3x the pool.
    loader = stoker.DataLoader(BigDataset(192, 4096), batch_size=4, num_workers=2, max_memory=1 << 20)
    kept = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        it = iter(loader)
        for b in it:
            kept.append(b)
            st = it.stats()
            assert st["arena_bytes"] <= 1 << 20, "the pool's memory stays within max_memory"
    assert len(kept) == 48
    assert [int(x[0, 0]) for x in kept] == list(range(0, 192, 4)), "copied-out batches keep their values"
    assert any("copied out of shared memory" in str(x.message) for x in w)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_batch_larger_than_max_memory_is_a_clear_error_naming_the_index(num_workers):
    # 4 MiB batches with max_memory=2 MiB
    loader = stoker.DataLoader(BigDataset(4, 1 << 19), batch_size=2, num_workers=num_workers, max_memory=2 << 20)
    with pytest.raises(MemoryError) as e:
        list(loader)
    msg = str(e.value)
    assert "batch 0 (indices [0, 1])" in msg, msg
    needs = int(re.search(r"needs (\d+) bytes", msg).group(1))
    assert 4 << 20 <= needs < (4 << 20) + 4096, msg
    assert "max_memory=2097152" in msg and "raise max_memory" in msg, msg


def test_variable_sized_batches_fit_after_growth():
    class Growing(IndexDataset):
        def __getitem__(self, i):
            return torch.ones(10 * (i + 1))

    loader = stoker.DataLoader(Growing(40), batch_size=None, num_workers=2)
    assert [b.numel() for b in loader] == [10 * (i + 1) for i in range(40)]


class Mixed(IndexDataset):
    def __getitem__(self, i):
        return {"x": np.full(3, i, dtype=np.float32), "y": i, "z": 0.5 * i, "s": str(i),
                "ragged": np.zeros(1 + (i % 2))}


def test_numpy_output_collates_like_torch_and_falls_back_for_odd_inputs():
    class Regular(Mixed):
        def __getitem__(self, i):
            d = super().__getitem__(i)
            del d["ragged"]
            return d

    b = next(iter(stoker.DataLoader(Regular(8), batch_size=4, num_workers=2, output="numpy")))
    assert b["x"].dtype == np.float32 and b["x"].shape == (4, 3)
    assert b["y"].dtype == np.int64 and b["y"].tolist() == [0, 1, 2, 3]
    assert b["z"].dtype == np.float64 and b["s"] == ["0", "1", "2", "3"]
    with pytest.raises(RuntimeError, match="equal size"):
        list(stoker.DataLoader(Mixed(8), batch_size=4, num_workers=2, output="numpy"))


class Huge(IndexDataset):
    def __getitem__(self, i):
        return torch.empty(70 << 20, dtype=torch.float32)  # 280 MiB


@pytest.mark.parametrize("num_workers", [0, 1])
def test_samples_past_max_memory_fail_clearly_every_time_and_never_hang(num_workers):
    it = iter(stoker.DataLoader(Huge(3), batch_size=1, num_workers=num_workers, max_memory=16 << 20))
    errors = 0
    while True:
        try:
            next(it)
        except StopIteration:
            break
        except MemoryError as e:
            assert f"indices [{errors}]" in str(e) and "raise max_memory" in str(e), str(e)
            errors += 1
    assert errors == 3, "each index fails on its own, and the loader goes on"
    del it


CGROUP_SCRIPT = """
import os, sys
with open(os.path.join(sys.argv[1], "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
sys.path.insert(0, sys.argv[2])
import stoker
from datasets import IndexDataset
print(stoker.DataLoader(IndexDataset(4), num_workers=2).max_memory)
try:
    stoker.DataLoader(IndexDataset(4), num_workers=2, max_memory=512 << 20)
except ValueError as e:
    print(e)
"""


def test_a_budget_the_machine_cannot_hold_is_refused_and_the_default_fits():
    import os
    import subprocess
    import sys
    from helpers import limited_cgroup
    with limited_cgroup(256 << 20, "budget") as cg:
        out = subprocess.run([sys.executable, "-c", CGROUP_SCRIPT, cg, os.path.dirname(os.path.abspath(__file__))],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    default, msg = out.stdout.strip().split("\n", 1)
    assert int(default) == 64 << 20, "the default budget is a quarter of the container's memory"
    assert "max_memory=536870912 bytes is more than this machine can hold" in msg, msg
    assert "268435456 bytes" in msg and "lower max_memory" in msg, msg


class GrowingMap(IndexDataset):
    """Samples that jump from 64 KiB to 1.6 MiB: batches outgrow their regions
    while a tight pool is full.  The first big batch is slow, so in order the
    later ones fill the pool while it is made."""

    def __getitem__(self, i):
        if i == 24:
            time.sleep(0.3)
        return torch.full(((16 << 10) * (1 + 12 * (i // 24)),), float(i))


class GrowingStream(torch.utils.data.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        for i in range(info.id, self.n, info.num_workers):
            if i == 24:
                time.sleep(0.3)  # worker 1's big batches fill the pool meanwhile
            yield torch.full(((16 << 10) * (1 + 12 * (i // 24)),), float(i))


@pytest.mark.parametrize("in_order", [True, False])
def test_tight_pool_with_growing_batches_delivers_everything_once(in_order):
    # Every run must be exact; in order, within a few runs one must have
    # handed batches back and spilled ready ones (timing decides which run).
    provoked = []
    for _attempt in range(6):
        it = iter(stoker.DataLoader(GrowingMap(72), batch_size=2, num_workers=2, max_memory=8 << 20,
                                    in_order=in_order, prefetch_factor=4))
        got = []
        for b in it:
            got += b[:, 0].tolist()
            assert it.stats(memory=False)["arena_bytes"] <= 8 << 20
        assert (got if in_order else sorted(got)) == [float(i) for i in range(72)]
        st = it.stats(memory=False)
        provoked.append((st["cancelled"], st["spills"]))
        del it, b
        if not in_order or (st["cancelled"] and st["spills"]):
            break
    if in_order:
        assert any(c and s for c, s in provoked), f"no run filled the pool while batch 12 waited: {provoked}"


def test_iterable_dataset_items_survive_a_handed_back_batch():
    # Whether a batch is handed back depends on timing; every run must be
    # exact, and within a few runs one must have handed batches back.
    cancelled = []
    for _attempt in range(6):
        it = iter(stoker.DataLoader(GrowingStream(72), batch_size=2, num_workers=2, max_memory=8 << 20,
                                    prefetch_factor=4))
        got = []
        for b in it:
            got += b[:, 0].tolist()
        assert sorted(got) == [float(i) for i in range(72)], "no item lost or read twice"
        cancelled.append(it.stats(memory=False)["cancelled"])
        del it, b
        if cancelled[-1]:
            break
    assert max(cancelled) > 0, f"no run handed a batch back: {cancelled}"
