"""A tiny /dev/shm (Docker's default is 64 MB) does not affect stoker.

The loader runs in a private mount namespace whose /dev/shm is a 1 MiB tmpfs,
with 8 MiB batches, a StringList and an Array.  torch's DataLoader is run the
same way to show the limit is real (its worker batches go through /dev/shm
and fail).  Where mount namespaces are not allowed (no root), the test still
checks that a stoker run creates nothing in /dev/shm and maps nothing from it.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import stoker
from stoker import shared
from datasets import BigDataset, NamesDataset

TESTS = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import torch, stoker
    from stoker import shared
    from datasets import BigDataset, NamesDataset
    kind, ctx = sys.argv[1], sys.argv[2]
    Loader = stoker.DataLoader if kind == "stoker" else torch.utils.data.DataLoader
    total = 0.0
    # 16 samples of 2 MiB, batches of 8 MiB: each batch alone is 8x /dev/shm.
    for b in Loader(BigDataset(16, 1 << 19), batch_size=4, num_workers=2, multiprocessing_context=ctx):
        total += float(b[:, 0].sum())
    names = shared.StringList("f%06d.jpg" % i for i in range(200000))  # ~3 MiB
    arr = shared.Array((1 << 20,), "float32")  # 4 MiB
    n = sum(int(b[:, 1].sum()) for b in Loader(NamesDataset(names), batch_size=1000, num_workers=2,
                                               multiprocessing_context=ctx))
    print("ok", total, n, arr.nbytes)
""").format(tests=TESTS)


def small_dev_shm_available():
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                       capture_output=True)
    return r.returncode == 0


def run_with_1mib_dev_shm(kind, ctx):
    cmd = ("mount -t tmpfs -o size=1m tmpfs /dev/shm && exec " + sys.executable + " -c \"$STOKER_SCRIPT\" "
           + kind + " " + ctx)
    env = {**os.environ, "STOKER_SCRIPT": SCRIPT, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.skipif(not small_dev_shm_available(), reason="needs root to mount a private /dev/shm")
@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_stoker_runs_with_a_1_mib_dev_shm_and_torch_does_not(ctx):
    r = run_with_1mib_dev_shm("stoker", ctx)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[0] == "ok"
    expected = float(sum(range(16)))
    assert float(r.stdout.split()[1]) == expected
    t = run_with_1mib_dev_shm("torch", ctx)
    assert t.returncode != 0, "torch should fail with this /dev/shm, or the test proves nothing"


def test_nothing_is_created_in_or_mapped_from_dev_shm():
    before = set(os.listdir("/dev/shm"))
    names = shared.StringList("f%d" % i for i in range(1000))
    arr = shared.Array((1000,), "int64")
    it = iter(stoker.DataLoader(BigDataset(32, 1 << 16), batch_size=4, num_workers=2))
    maps = []
    for b in it:
        for w in it._workers:
            with open(f"/proc/{w.pid}/maps") as f:
                maps.append(f.read())
        with open("/proc/self/maps") as f:
            maps.append(f.read())
        assert set(os.listdir("/dev/shm")) <= before, "stoker created a file in /dev/shm"
    assert not any("/dev/shm" in m for m in maps)
    assert any("memfd:stoker-arena" in m for m in maps), "the pool is an anonymous memfd"
    del names, arr


PROGRESS_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import stoker
from datasets import BigDataset
for b in stoker.DataLoader(BigDataset(8, 1 << 10), batch_size=4, num_workers=2, progress=True):
    pass
with open("/proc/self/maps") as f:
    print(sum("/dev/shm" in line for line in f))
"""


def test_the_progress_bar_maps_nothing_from_dev_shm():
    """tqdm's default lock is a multiprocessing semaphore in /dev/shm: the
    loader's bar (drawn in this process only) takes a thread lock instead."""
    pytest.importorskip("tqdm")
    out = subprocess.run([sys.executable, "-c", PROGRESS_SCRIPT, TESTS], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "2/2" in out.stderr, "the bar was drawn with tqdm"
    assert out.stdout.split()[-1] == "0", out.stdout
