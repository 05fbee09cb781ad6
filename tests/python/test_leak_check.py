"""The check every test passes through (conftest: _no_leaks) sees each kind
of leak it is meant to see, and forgives nothing else."""
import gc
import os
import subprocess
import sys
import threading
import time

from leaks import Resources

import stoker


def test_each_kind_of_leak_is_named_and_none_once_cleaned_up():
    before = Resources.now()
    assert before.leaked_since(within_s=0.1) == ""
    r, w = os.pipe()
    memfd = os.memfd_create("stoker-test-leak")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="a-test-thread")
    t.start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        leaked = before.leaked_since(within_s=0.1)
        assert f"{r}: 'pipe:" in leaked and f"{w}: 'pipe:" in leaked, leaked
        assert "memfds {" in leaked and "/memfd:stoker-test-leak" in leaked, leaked
        assert "threads ['a-test-thread']" in leaked, leaked
        assert f"child processes [{child.pid}]" in leaked, leaked
    finally:
        child.kill()
        child.wait()
        stop.set()
        t.join()
        for fd in (r, w, memfd):
            os.close(fd)
    assert before.leaked_since(within_s=1.0) == ""


def test_a_loader_left_to_the_collector_leaks_nothing():
    before = Resources.now()
    loader = stoker.DataLoader(list(range(64)), batch_size=8, num_workers=2)
    it = iter(loader)
    next(it)
    assert "native threads" in before.leaked_since(within_s=0.1)  # its supervisor, while it lives
    del it, loader
    assert before.leaked_since(within_s=5.0) == ""


def test_loaders_run_to_the_end_hold_no_descriptors_until_the_collector_runs():
    # Each finished loader gives its pipes back without gc.collect(): a
    # training script that builds a loader per epoch (or per evaluation)
    # must not pile descriptors up until the cyclic collector happens to run
    # (it held 4 per loader, in a cycle through each worker's Popen).
    from leaks import _fds
    gc.collect()
    gc.disable()
    try:
        base = len(_fds())
        for _ in range(30):
            loader = stoker.DataLoader(list(range(64)), batch_size=8, num_workers=2)
            for b in loader:
                pass
        del loader, b
        deadline = time.monotonic() + 5.0  # (the workers are joined off the loop's path, within ms)
        while len(_fds()) > base and time.monotonic() < deadline:
            time.sleep(0.01)
        left = len(_fds()) - base
        assert left <= 0, f"{left} descriptors more than before 30 loaders: {sorted(_fds().values())}"
    finally:
        gc.enable()
