"""A worker forked while another thread of the parent holds CPython 3.11's
thread-list lock hangs inside os.fork() (python/cpython#112275): the loader
kills it and forks it again (stoker/_fork_guard.py).  The tests hold the very
lock across the fork, from an at-fork hook, as a native thread entering Python
at that moment would."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                                reason="the layout of _PyRuntime read below is 3.11's (3.12 fixed the bug)")

SCRIPT = r"""
import ctypes, logging, os, sys
import torch, stoker, stoker._fork_guard
logging.basicConfig(level=logging.WARNING)
stoker._fork_guard.LIMITS_S = (2.0, 4.0)
# _PyRuntime.interpreters.mutex: offset 32 in 3.11's _PyRuntimeState.
runtime = ctypes.addressof(ctypes.c_int.in_dll(ctypes.pythonapi, "_PyRuntime"))
head_lock = ctypes.c_void_p.from_address(runtime + 32).value
acquire, release = ctypes.pythonapi.PyThread_acquire_lock, ctypes.pythonapi.PyThread_release_lock
acquire.argtypes, release.argtypes = [ctypes.c_void_p, ctypes.c_int], [ctypes.c_void_p]
forks_to_spoil = int(sys.argv[1])
held = []
def before():
    global forks_to_spoil
    if forks_to_spoil > 0:
        forks_to_spoil -= 1
        assert acquire(head_lock, 0) == 1, "the lock is free between two Python statements"
        held.append(1)
def after_in_parent():
    if held:
        held.pop()
        release(head_lock)
os.register_at_fork(before=before, after_in_parent=after_in_parent)
loader = stoker.DataLoader(torch.utils.data.TensorDataset(torch.arange(40)), batch_size=4, num_workers=2)
try:
    got = sorted(int(i) for b, in loader for i in b)
except RuntimeError as e:
    print("raised:", e)
    sys.exit(3)
assert got == list(range(40)), got
print("ok")
"""


def run(spoiled):
    return subprocess.run([sys.executable, "-c", SCRIPT, str(spoiled)], capture_output=True, text=True, timeout=120)


def test_a_worker_stuck_inside_fork_is_killed_forked_again_and_every_batch_arrives():
    out = run(1)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr[-3000:]
    warned = [line for line in out.stderr.splitlines() if "inside os.fork()" in line]
    assert len(warned) == 1, out.stderr[-3000:]
    assert "DataLoader worker 0" in warned[0] and "python/cpython#112275" in warned[0]
    assert "forking it again (2 of 2)" in warned[0]


def test_a_worker_that_never_comes_out_of_fork_is_an_error_that_says_what_to_do():
    out = run(2)
    assert out.returncode == 3, out.stdout + out.stderr[-3000:]
    assert "DataLoader worker 0 was forked 2 times and never came out of os.fork()" in out.stdout
    assert "Python 3.12" in out.stdout and "forkserver" in out.stdout
