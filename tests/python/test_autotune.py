"""num_workers="auto" and prefetch_factor="auto" (stoker/_autotune.py): the
autotuner adds workers while the loop waits on them, takes them away when it
no longer does, holds max_memory while it adds them (PSS sampled at 20 Hz),
and a resume across its change of worker count is exact."""
import functools
import gc
import json
import mmap
import os
import threading
import time
import weakref

import numpy as np
import pytest
import torch

import stoker
from stoker import _native as N
from stoker.io import RawDataset
from helpers import counting_shards
from nginx import Nginx


class Sleepy(torch.utils.data.Dataset):
    """__getitem__ waits `cost` seconds (a shared value: the test changes it
    under running workers), and returns the index and, with `noise`, a
    random draw from torch's generator (an augmentation)."""

    def __init__(self, n, cost=0.004, noise=False, size=1):
        self.n, self.noise, self.size = n, noise, size
        self.cost = np.frombuffer(mmap.mmap(-1, 8), dtype=np.float64)  # (anonymous, shared with forked workers)
        self.cost[0] = cost

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.cost[0])
        x = np.full(self.size, i, dtype=np.float32)
        if self.noise:
            x = x + torch.rand(self.size).numpy()
        return x


def decisions(loader, knob="num_workers"):
    return [d for d in loader.stats(False)["autotune"]["decisions"] if d["knob"] == knob]


def test_bad_values_are_refused_with_the_option_named():
    for kw, word in (({"num_workers": "many"}, "num_workers"), ({"num_workers": -1}, "num_workers"),
                     ({"num_workers": 2, "prefetch_factor": "lots"}, "prefetch_factor"),
                     ({"num_workers": "auto", "prefetch_factor": 0}, "prefetch_factor")):
        with pytest.raises(ValueError, match=word):
            stoker.DataLoader(Sleepy(8), **kw)


def test_it_adds_workers_while_the_loop_waits_and_says_why():
    loader = stoker.DataLoader(Sleepy(2400, cost=0.004), batch_size=8, num_workers="auto", prefetch_factor="auto")
    assert loader.num_workers >= 8  # the most it may start
    got = np.concatenate([b.numpy().ravel() for b in loader])
    assert got.tolist() == list(range(2400))  # in order, each once
    st = loader.stats(False)["autotune"]
    assert st["tuning"] == ["num_workers", "prefetch_factor"]
    added = [d for d in decisions(loader) if d["new"] > d["old"]]
    assert len(added) >= 2, st["decisions"]
    for d in st["decisions"]:
        assert set(d) >= {"t", "knob", "old", "new", "measured", "reason"}
        assert {"batches_per_s", "stall", "busy", "runnable"} <= set(d["measured"]) and d["reason"]
    first = added[0]
    assert (first["old"], first["new"]) == (1, 2) and first["kept"] and first["gain"] > 1.3
    assert "waited" in first["reason"]


def test_a_new_epoch_starts_where_the_last_left_and_iterators_are_freed_at_once():
    gc.disable()
    try:
        loader = stoker.DataLoader(Sleepy(1200, cost=0.004), batch_size=8, num_workers="auto")
        for _ in loader:
            pass
        n, total = loader.stats(False)["autotune"]["num_workers"], loader.stats(False)["autotune"]["decisions_total"]
        assert n >= 2
        it = iter(loader)  # (no persistent workers: an iterator per epoch)
        ref = weakref.ref(it)
        assert it._tuner.n == n and sum(w is not None for w in it._workers) == n
        next(it)
        del it
        assert ref() is None  # its tuner holds no cycle: freed (workers, arena) without the cyclic GC
        assert loader.stats(False)["autotune"]["decisions_total"] >= total  # one log for the loader
    finally:
        gc.enable()


def test_workers_it_no_longer_needs_leave_cleanly():
    ds = Sleepy(100_000, cost=0.006)
    loader = stoker.DataLoader(ds, batch_size=4, num_workers="auto")
    it = iter(loader)
    got, t0 = [], time.monotonic()
    for b in it:  # a slow __getitem__: workers are added
        got.extend(b.numpy().ravel().astype(int).tolist())
        if it._tuner.n >= 3 or time.monotonic() - t0 > 30:
            break
    peak = it._tuner.n
    assert peak >= 3, loader.stats(False)["autotune"]
    pids = [w.pid for w in it._workers if w is not None]
    ds.cost[0] = 0.0  # now the training loop is the bound
    t0 = time.monotonic()
    for b in it:
        got.extend(b.numpy().ravel().astype(int).tolist())
        time.sleep(0.02)
        if (it._tuner.n == 1 and not it._tuner.retiring) or time.monotonic() - t0 > 60:
            break
    assert it._tuner.n < peak, loader.stats(False)["autotune"]
    removed = [d for d in decisions(loader) if d["new"] < d["old"]]
    assert removed and any("may carry the work" in d["reason"] or "no longer waits" in d["reason"] for d in removed)
    for b in it:  # on to the end: nothing lost, nothing twice, no worker reported dead
        got.extend(b.numpy().ravel().astype(int).tolist())
        if len(got) >= 3000:
            break
    assert got == list(range(len(got)))
    live = {w.pid for w in it._workers if w is not None}
    gone = [p for p in pids if p not in live]
    assert gone, (pids, live)
    for p in gone:  # retired workers exited (and were reaped): no zombie, no crash
        assert not os.path.exists(f"/proc/{p}"), p
    del it


def test_a_resume_across_a_change_of_worker_count_is_exact():
    ds = Sleepy(1200, cost=0.004, noise=True, size=4)

    def loader():
        return stoker.DataLoader(ds, batch_size=4, num_workers="auto", prefetch_factor="auto", sample_seeds=True,
                                 seed=7, shuffle=True, generator=torch.Generator().manual_seed(5))
    first = loader()
    it = iter(first)
    got, state, at = [], None, None
    for b in it:
        got.append(b.clone())
        if state is None and it._tuner.n >= 2 and len(got) % 7 == 0:
            state, at = first.state_dict(), len(got)
    assert state is not None, first.stats(False)["autotune"]
    assert max(n for _first, n in state["schedule"]) >= 2, state["schedule"]
    assert len(json.dumps(state["schedule"])) < 200
    again = loader()
    again.load_state_dict(state)
    rest = list(again)
    assert len(rest) == len(got) - at
    for k, (a, b) in enumerate(zip(rest, got[at:])):
        assert torch.equal(a, b), f"batch {at + k} differs"
    # A loader with a fixed count takes the same state on.
    fixed = stoker.DataLoader(ds, batch_size=4, num_workers=2, sample_seeds=True, seed=7, shuffle=True,
                              generator=torch.Generator().manual_seed(5))
    fixed.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(list(fixed), got[at:]))


class WhoLoads(torch.utils.data.Dataset):
    def __len__(self):
        return 300

    def __getitem__(self, i):
        time.sleep(0.002)
        return np.array([i, torch.utils.data.get_worker_info().id])


def test_a_resumed_run_follows_the_saved_schedule_then_tunes_on():
    """The saved segments decide which worker loads each batch they hold,
    workers above the last count included (not retired before their
    batches); then the tuner goes on."""
    first = stoker.DataLoader(WhoLoads(), batch_size=2, num_workers="auto")
    it = iter(first)
    for _ in range(10):
        next(it)
    state = first.state_dict()
    del it
    assert state["delivered"] == 10 and state["schedule"] == [[0, 1]] or state["schedule"][-1][0] <= 10
    state["schedule"] = [[8, 3], [16, 1]]  # batches 10-15 on 3 workers, (k - 8) mod 3; one from 16 on
    again = stoker.DataLoader(WhoLoads(), batch_size=2, num_workers="auto")
    again.load_state_dict(state)
    rows = [b.numpy() for b in again]
    assert np.concatenate([r[:, 0] for r in rows]).tolist() == list(range(20, 300))
    for k, r in enumerate(rows[:6], start=10):
        assert (r[:, 1] == (k - 8) % 3).all(), (k, r)


def test_the_budget_holds_while_it_adds_workers():
    """8 MiB samples under max_memory=256 MiB: the process tree's PSS, read
    20 times a second, never grows past the budget as workers come."""
    budget = 256 << 20
    ds = Sleepy(500, cost=0.02, size=2 << 20)  # float32: 8 MiB a sample
    loader = stoker.DataLoader(ds, batch_size=1, num_workers="auto", prefetch_factor="auto", max_memory=budget)
    base = N.lib.process_memory(os.getpid())["pss"]
    worst, samples, stop = [0], [0], threading.Event()
    it = iter(loader)

    def sample():  # (this loader's processes: this one and its workers, leaving ones included)
        while not stop.wait(0.05):
            pss = 0
            for pid in [os.getpid()] + [w.pid for w in list(it._workers) if w is not None]:
                try:
                    pss += N.lib.process_memory(pid)["pss"]
                except Exception:  # noqa: BLE001 - a worker that just left
                    pass
            worst[0] = max(worst[0], pss - base)
            samples[0] += 1
    t = threading.Thread(target=sample)
    t.start()
    try:
        n = 0
        for b in it:
            n += b.shape[0]
            time.sleep(0.002)
    finally:
        stop.set()
        t.join()
    assert n == 500
    st = loader.stats(False)["autotune"]
    assert any(d["new"] > d["old"] for d in decisions(loader)), st["decisions"]
    assert samples[0] >= 20
    assert worst[0] <= budget, f"the tree grew {worst[0] >> 20} MiB past {budget >> 20} MiB: {st['decisions']}"


def test_an_iterable_datasets_count_is_one_per_core():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, 40, info.num_workers))
    loader = stoker.DataLoader(Stream(), batch_size=None, num_workers="auto")
    assert sorted(int(x) for x in loader) == list(range(40))
    (d,) = decisions(loader)
    assert d["old"] is None and d["new"] == min(loader.num_workers, len(os.sched_getaffinity(0)))
    assert "IterableDataset" in d["reason"]


def test_native_reader_threads_come_and_go_under_the_schedule(tmp_path):
    """A native dataset's C++ reader threads are started and retired as
    worker processes are: every record once, in order, threads gone."""
    path = tmp_path / "r.bin"
    np.arange(20_000, dtype=np.int64).tofile(path)
    loader = stoker.DataLoader(RawDataset(str(path), "int64", (1,)), batch_size=8, num_workers="auto")
    it = iter(loader)
    it._tuner._decide = lambda m: None  # (the test's changes only)
    assert it._pump.active_workers == 1 and it._native_workers.running(0) and not it._native_workers.running(1)
    got = []
    for k, b in enumerate(it):
        got += b.ravel().tolist()
        if k == 20:
            it._tuner._set("num_workers", 4, {}, "the test's")
            assert all(it._native_workers.running(w) for w in range(4))
        if k == 1000:
            it._tuner._set("num_workers", 1, {}, "the test's")
        if k > 1000 and any(it._native_workers.running(w) for w in (1, 2, 3)):
            it._tuner._retire_idle()
        if k == 2000:
            assert not any(it._native_workers.running(w) for w in (1, 2, 3))
            assert loader.stats(False)["native"]["threads"] == 1
    assert got == list(range(20_000))


def tuner_fed_by_the_test(tmp_path):
    """(loader, iterator, its tuner) over a native dataset, for a test that
    feeds the tuner's decisions windows of its own (no start depth is drawn
    from them)."""
    path = tmp_path / "r.bin"
    np.arange(4096, dtype=np.int64).tofile(path)
    loader = stoker.DataLoader(RawDataset(str(path), "int64", (1,)), batch_size=8, num_workers="auto")
    it = iter(loader)
    it._tuner.noted.add("seeded")
    return loader, it, it._tuner


def window(rate, cost, stall=0.05, busy=0.9, runnable=2.0):
    """A window's measurements (by default the loop waits a little: no knob moves of itself)."""
    return {"window_s": 0.5, "batches_per_s": rate, "stall": stall, "memory_wait": 0.0, "busy": busy,
            "store_wait": 0.0, "runnable": runnable, "cost_s": cost}


def test_a_worker_count_it_kept_is_not_taken_for_a_change_of_workload(tmp_path):
    """A worker's busy time counts its wait for a core: with more workers
    than cores a batch costs more worker seconds, the workload the same.
    After a kept worker trial the workload's signature is taken again at the
    new count; a change at one count (4x) opens every knob again."""
    loader, it, t = tuner_fed_by_the_test(tmp_path)
    m = window
    t._set("num_workers", 2, {}, "the test's")
    t._try("num_workers", 4, m(50, 0.04), "the test's")
    t._decide(m(45, 0.08))  # 4 lose: back to 2, the knob closed above 3
    assert (t.n, t.top_n) == (2, 3) and not decisions(loader, "workload")
    t._try("num_workers", 3, m(50, 0.04), "the test's")
    t._decide(m(60, 0.06))  # kept, and each batch costs 1.5x the worker seconds
    t._decide(m(60, 0.066))  # 1.65x those at 2 workers, the same at 3
    t._decide(m(61, 0.064))
    assert t.n == 3 and not decisions(loader, "workload"), loader.stats(False)["autotune"]["decisions"]
    t._decide(m(20, 0.26))  # 4x at the same count: the workload changed
    (d,) = decisions(loader, "workload")
    assert "every knob open again" in d["reason"] and t.top_n == t.cap
    it._shutdown_workers()


def test_a_workload_that_changes_under_a_trial_leaves_no_knob_closed(tmp_path):
    """The per-sample cost rises 2.4x while a worker more is on trial: its
    window and the one before measured two workloads, so the trial is undone
    unjudged, no knob closes, and the next trial starts from the new
    workload's own windows.  (Judged, it compared the new workload's rate
    with the old one's batches: 0.95x, closed; the loop then waited 71% at 2
    workers for good.)"""
    loader, it, t = tuner_fed_by_the_test(tmp_path)
    m = functools.partial(window, busy=1.0, runnable=1.0)
    t._set("num_workers", 2, {}, "the test's")
    t._decide(m(200, 0.01))
    t._try("num_workers", 3, m(200, 0.01), "the test's")
    t._decide(m(150, 0.024))  # the trial's window: the cost moved 2.4x from the window before
    (d,) = decisions(loader, "workload")
    assert "from one window to the next" in d["reason"]
    assert t.trial is None and t.n == 2 and t.top_n == t.cap  # undone, nothing closed
    assert "on trial when the workload changed" in decisions(loader)[-1]["reason"]
    t.skip = False
    t._decide(m(62, 0.032, stall=0.7))  # the new workload's first window: the loop waits, so one more
    assert t.trial is not None and t.trial[:3] == ("num_workers", 2, 3)
    t._decide(m(93, 0.032, stall=0.5))  # 1.5x: kept, in proportion, and the loop still waits: 6 on trial
    assert [d for d in decisions(loader) if d["new"] == 3][-1]["kept"] and t.trial[:3] == ("num_workers", 3, 6)
    assert len(decisions(loader, "workload")) == 1
    it._shutdown_workers()


def test_its_decisions_are_in_the_trace(tmp_path):
    path = str(tmp_path / "run.json")
    loader = stoker.DataLoader(Sleepy(1200, cost=0.004), batch_size=8, num_workers="auto")
    with stoker.trace(path):
        for _ in loader:
            pass
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    marks = [e for e in events if e.get("ph") == "i" and e["name"] == "autotune"]
    assert marks and marks[0]["args"]["knob"] == "num_workers" and marks[0]["args"]["new"] == 2
    assert len(marks) == loader.stats(False)["autotune"]["decisions_total"]


def test_a_streaming_datasets_fetchers_are_one_of_its_knobs(tmp_path):
    """Read by C++ threads, a StreamingDataset whose fetchers were left to
    choose (fetchers=None) hands their number to the autotuner: nginx holds
    each connection to 400 KB/s, the readers wait for downloads, and the
    tuner adds fetchers and keeps them (each adds to the rate), in the same
    log as its workers; the dataset's own scaling decides no more, and every
    sample comes once an epoch."""
    from stoker.cache import StreamingDataset
    shards, per_shard = 60, 50
    www = counting_shards(tmp_path / "www", shards, per_shard, width=256)
    server = Nginx(tmp_path / "nginx", www, slow_rate="400k").start()
    try:
        ds = StreamingDataset(server.url + "/slow", str(tmp_path / "cache"), max_bytes=0, mode="full",
                              features={"x": ("float32", (256,)), "y": ("int64", ())}, shuffle_window=2,
                              prefetch=8)
        start = ds.stats()["fetchers"]
        loader = stoker.DataLoader(ds, batch_size=25, shuffle=True, num_workers="auto", prefetch_factor="auto",
                                   persistent_workers=True)  # (one tuner: its windows span the 1-2 s epochs)
        deadline, kept = time.monotonic() + 90, []
        for epoch in range(1000):
            loader.set_epoch(epoch)
            assert sorted(int(y) for b in loader for y in b["y"]) == list(range(shards * per_shard))
            kept = [d for d in decisions(loader, "fetchers") if d.get("kept") and d["new"] > d["old"]]
            if kept or time.monotonic() > deadline:
                break
        log = loader.stats(False)["autotune"]
        assert kept, log
        assert "waited for downloads" in kept[0]["reason"], kept[0]
        st = ds.stats()
        assert st["fetchers_by_caller"] and st["fetchers"] > start, st
        assert log["fetchers"] == st["fetchers"] and "fetchers" in log["tuning"], log
        del loader  # (its reader threads, before the dataset closes)
        gc.collect()
        ds.close()
    finally:
        server.stop()
