"""Every fault provoked for real (exceptions, signals, hangs, a killed
main process, Ctrl-C, early exits), each followed by a leak check."""
import ctypes
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset

import stoker
from leaks import Baseline, alive, children, wait_gone
from helpers import limited_cgroup

TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def clean():
    base = Baseline()
    yield base
    base.assert_clean()


# ---- exceptions in user code ------------------------------------------------

class RaiseIn(Dataset):
    def __init__(self, where, n=12):
        self.where, self.n = where, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.where == "getitem" and i == 5:
            raise KeyError(f"missing sample {i}")
        return torch.tensor(i)


def bad_collate(samples):
    if any(int(s) == 5 for s in samples):
        raise ZeroDivisionError("collate refused")
    return torch.stack(samples)


def bad_init(worker_id):
    raise OSError(f"no GPU for worker {worker_id}")


class BadIter(IterableDataset):
    """Worker 0 cannot create its iterator; worker 1 yields 0..5."""

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None or info.id == 0:
            raise TypeError("cannot iterate")
        return iter(range(6))


def test_exception_in_getitem(clean):
    it = iter(stoker.DataLoader(RaiseIn("getitem"), batch_size=2, num_workers=2))
    assert [int(x) for x in next(it)] == [0, 1]
    next(it)
    with pytest.raises(KeyError) as err:
        next(it)
    text = str(err.value)
    for part in ("missing sample 5", "worker process", "pid", "[4, 5]", "Traceback", "__getitem__"):
        assert part in text, part
    assert [int(x) for b in it for x in b] == [6, 7, 8, 9, 10, 11], "iteration continues like torch"
    del it


def test_exception_in_collate_fn(clean):
    it = iter(stoker.DataLoader(RaiseIn("none"), batch_size=2, num_workers=2, collate_fn=bad_collate))
    got = []
    with pytest.raises(ZeroDivisionError, match="collate refused") as err:
        for b in it:
            got.append(b)
    assert "[4, 5]" in str(err.value) and "bad_collate" in str(err.value)
    assert len(got) == 2
    assert len(list(it)) == 3
    del it


def test_exception_in_worker_init_fn(clean):
    with pytest.raises(OSError, match="no GPU for worker") as err:
        list(stoker.DataLoader(RaiseIn("none"), batch_size=2, num_workers=2, worker_init_fn=bad_init))
    assert "worker_init_fn" in str(err.value) and "pid" in str(err.value)


def test_exception_in_iter(clean):
    it = iter(stoker.DataLoader(BadIter(), batch_size=2, num_workers=2))
    with pytest.raises(TypeError, match="cannot iterate") as err:
        next(it)
    assert "worker process 0" in str(err.value) and "iter(dataset)" in str(err.value)
    assert [int(x) for b in it for x in b] == list(range(6)), "the other worker's data still comes"
    del it


# ---- crashes --------------------------------------------------------------------

def _segv():
    ctypes.string_at(0)


def _bus():
    with tempfile.TemporaryFile() as f:
        f.truncate(8192)
        m = mmap.mmap(f.fileno(), 8192)
        f.truncate(0)
        m[4096]  # beyond the file's end: SIGBUS


CRASHES = {
    "sigkill": (lambda: os.kill(os.getpid(), signal.SIGKILL), dict(signal=signal.SIGKILL)),
    "sigsegv": (_segv, dict(signal=signal.SIGSEGV)),
    "sigbus": (_bus, dict(signal=signal.SIGBUS)),
    "exit3": (lambda: os._exit(3), dict(exit_code=3)),
}


class Crash(Dataset):
    def __init__(self, how, stamp):
        self.how, self.stamp = how, stamp

    def __len__(self):
        return 40

    def __getitem__(self, i):
        if i == 9:
            # No core dump: where the machine writes cores (ulimit -c, a
            # core_pattern pipe) the kernel holds the dying process until its
            # memory is written out, seconds for a torch-importing worker.
            # That time is the machine's, not the loader's.
            PR_SET_DUMPABLE = 4
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
            with open(self.stamp, "w") as f:
                f.write(repr(time.monotonic()))
            CRASHES[self.how][0]()
        time.sleep(0.001)
        return torch.tensor(i)


@pytest.mark.parametrize("how", sorted(CRASHES))
def test_worker_crash_is_reported_as_it_happens(how, clean, tmp_path):
    # Reported from the death itself (the engine watches each worker's
    # pidfd), not found by a periodic check: torch's checks every 5 s.  The
    # bound is a hang's, not a speed claim (bench/crash_latency.py measures
    # it: a few ms).
    stamp = str(tmp_path / "died_at")
    loader = stoker.DataLoader(Crash(how, stamp), batch_size=3, num_workers=2)
    with pytest.raises(stoker.WorkerCrashed) as err:
        for _ in loader:
            pass
    latency = time.monotonic() - float(open(stamp).read())
    e = err.value
    assert isinstance(e, RuntimeError)
    for key, value in CRASHES[how][1].items():
        assert getattr(e, key) == value, (key, getattr(e, key))
    assert 9 in e.indices[0] and "[9, 10, 11]" in str(e) and f"pid {e.pid}" in str(e)
    assert latency < 2.0, f"reported {latency * 1e3:.0f} ms after the death"


def test_sigkill_by_hand_is_not_called_oom(clean):
    class Waits(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            time.sleep(30)

    it = iter(stoker.DataLoader(Waits(), batch_size=1, num_workers=2))
    victim = it._workers[0].pid
    import threading
    threading.Timer(0.3, lambda: os.kill(victim, signal.SIGKILL)).start()
    with pytest.raises(stoker.WorkerCrashed) as err:
        next(it)
    assert not err.value.oom and "no OOM kill was recorded" in str(err.value)
    del it


class Hog(Dataset):
    def __init__(self, cgroup):
        self.cgroup = cgroup

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            hog = bytearray(512 << 20)  # the cgroup allows 64 MiB: the OOM killer strikes
            hog[::4096] = b"x" * len(hog[::4096])
        return torch.tensor(i)


def test_oom_kill_is_named(clean):
    with limited_cgroup(64 << 20, "oom") as cg:
        with pytest.raises(stoker.WorkerCrashed) as err:
            list(stoker.DataLoader(Hog(cg), batch_size=1, num_workers=2))
        assert err.value.oom and "OOM killer" in str(err.value), str(err.value)


# ---- hangs ------------------------------------------------------------------------

class Hangs(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 4:
            time.sleep(3600)
        return torch.tensor(i)


def test_hanging_worker_times_out(clean):
    t0 = time.monotonic()
    with pytest.raises(stoker.LoaderTimeout) as err:
        list(stoker.DataLoader(Hangs(), batch_size=2, num_workers=2, timeout=0.5))
    assert 0.5 <= time.monotonic() - t0 < 10
    assert "0.5 seconds" in str(err.value) and "[4, 5]" in str(err.value) and "worker" in str(err.value)


# ---- the main process goes away -----------------------------------------------

MAIN_KILLED = r"""
import sys, time, torch
sys.path.insert(0, {tests!r})
import stoker
from datasets import BigDataset
# 16 MiB batches: the arena holds ~100 MiB, so a leak would show in Shmem.
loader = stoker.DataLoader(BigDataset(100000, 1 << 20), batch_size=4, num_workers=2, persistent_workers=True)
it = iter(loader)
held = [next(it) for _ in range(2)]
time.sleep(0.5)
print(" ".join(str(w.pid) for w in it._workers), it._engine.committed_bytes, flush=True)
time.sleep(3600)
"""


def test_main_process_sigkill_takes_workers_with_it(clean):
    proc = subprocess.Popen([sys.executable, "-c", MAIN_KILLED.format(tests=TESTS)], stdout=subprocess.PIPE,
                            text=True)
    *pids, committed = [int(p) for p in proc.stdout.readline().split()]
    assert committed > 64 << 20
    assert len(pids) == 2 and all(alive(p) for p in pids)
    proc.kill()
    t0 = time.monotonic()
    proc.wait()
    while any(alive(p) for p in pids) and time.monotonic() - t0 < 5:
        time.sleep(0.005)
    assert not any(alive(p) for p in pids)
    assert time.monotonic() - t0 < 3.0  # at once (each watches its parent's pidfd), not after a poll
    # the `clean` fixture then checks that the arena's memory (Shmem) came back


EARLY_EXITS = r"""
import gc, os, sys, time, torch
sys.path.insert(0, {tests!r})
import stoker
from datasets import IndexDataset
from leaks import children

def gone_within(seconds):
    t0 = time.monotonic()
    while children() and time.monotonic() - t0 < 5:
        time.sleep(0.001)
    return time.monotonic() - t0

ds = IndexDataset(100000)
# break
for b in stoker.DataLoader(ds, batch_size=2, num_workers=2):
    break
print("break", gone_within(0.1))
# del mid-epoch
it = iter(stoker.DataLoader(ds, batch_size=2, num_workers=2)); next(it); del it
print("del", gone_within(0.1))
# an exception in the training loop while the iterator is referenced
def train():
    it = iter(stoker.DataLoader(ds, batch_size=2, num_workers=2))
    next(it)
    raise ValueError("loss is nan")
try:
    train()
except ValueError:
    pass
print("exception", gone_within(0.1))
# interpreter exit with live persistent workers and pin_memory
loader = stoker.DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True, pin_memory=True)
next(iter(loader))
print("pids", " ".join(str(p) for p in children()), flush=True)
"""


def test_early_exits_leave_no_worker_behind(clean):
    proc = subprocess.run([sys.executable, "-W", "ignore::UserWarning", "-c", EARLY_EXITS.format(tests=TESTS)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    for case in ("break", "del", "exception"):
        # Gone as the iterator goes, not at the interpreter's exit or after a
        # timeout; a hang's bound (bench/shutdown_latency.py measures it: 5-12 ms).
        assert float(lines[case]) < 2.0, f"{case}: workers lived {float(lines[case]) * 1e3:.0f} ms"
    pids = [int(p) for p in lines["pids"].split()]
    assert len(pids) == 2
    time.sleep(0.1)
    assert not any(alive(p) for p in pids), "persistent workers outlived the interpreter"
    assert proc.stderr.strip() == "", proc.stderr


# ---- a worker waiting on the main process while it shuts down ----------------

class Growing(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return torch.zeros(1000 * (i + 1) ** 2)  # every batch needs a bigger region


def test_worker_waiting_for_space_exits_when_main_shuts_down(clean):
    it = iter(stoker.DataLoader(Growing(), batch_size=1, num_workers=2))
    next(it)
    time.sleep(0.2)  # workers now wait for the main process to enlarge their slots
    pids = [w.pid for w in it._workers]
    del it
    assert wait_gone(pids) < 3.0  # woken by the shutdown, not left waiting for space


def test_iterator_collected_inside_a_forked_worker_does_nothing(clean):
    """An unreachable iterator (kept by a reference cycle) may be collected by
    the cyclic GC inside a later forked worker: it must not touch the parent's
    workers from there."""
    import gc
    gc.disable()
    try:
        old = iter(stoker.DataLoader(RaiseIn("none", 100), batch_size=2, num_workers=2))
        next(old)
        pids = [w.pid for w in old._workers]
        cycle = [old]
        cycle.append(cycle)  # keep it only through a cycle
        del old, cycle

        class CollectsGarbage(RaiseIn):
            def __getitem__(self, i):
                gc.collect()  # runs the old iterator's __del__ inside this worker
                return torch.tensor(i)

        got = [int(x) for b in stoker.DataLoader(CollectsGarbage("none", 8), batch_size=2, num_workers=2)
               for x in b]
        assert got == list(range(8))
        assert all(alive(p) for p in pids), "a forked copy shut the parent's workers down"
    finally:
        gc.enable()
        gc.collect()


_ALIVE_AT_EXIT = r"""
import numpy as np, stoker, sys, torch
from stoker import io
kind = sys.argv[1]
if kind == "native":
    np.zeros((64, 4), np.float32).tofile(sys.argv[2])
    ds = io.RawDataset(sys.argv[2], "float32", (4,))
else:
    ds = torch.utils.data.TensorDataset(torch.arange(64))
loader = stoker.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
for _ in loader:
    pass
it = iter(loader)   # a second epoch, left mid-way in a global
next(it)
print("done", flush=True)
"""


@pytest.mark.parametrize("kind", ["native", "processes"])
def test_loader_alive_at_interpreter_exit_does_not_hang(kind, tmp_path):
    """The first shutdown happens during interpreter finalization, where no
    thread can start (a reaper thread started there used to hang forever)."""
    r = subprocess.run([sys.executable, "-c", _ALIVE_AT_EXIT, kind, str(tmp_path / "d.bin")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
