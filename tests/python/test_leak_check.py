"""The check every test passes through (conftest: _no_leaks) sees each kind
of leak it is meant to see, and forgives nothing else."""
import os
import subprocess
import sys
import threading

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
