"""stoker.shared: containers in shared memory, no copy-on-read."""
import gc
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import stoker
from stoker import shared
from datasets import ArrayWriter, NamesDataset


def names(n):
    return [f"images/train/{i % 1000:03d}/sample_{i:08d}.jpg" for i in range(n)]


def test_string_list_behaves_like_a_list_of_str():
    src = names(1000) + ["", "ünïcødé ✓", "x" * 5000]
    sl = shared.StringList(iter(src))
    assert len(sl) == len(src)
    assert [sl[i] for i in range(len(sl))] == src
    assert list(sl) == src
    assert sl[-1] == src[-1] and sl[-len(src)] == src[0]
    assert sl[10:20] == src[10:20] and sl[::-7] == src[::-7] and sl[5:2] == []
    assert isinstance(sl[0], str)
    with pytest.raises(IndexError, match="out of range"):
        sl[len(src)]
    with pytest.raises(TypeError, match="integers or slices"):
        sl["a"]
    with pytest.raises(TypeError, match="item 2 is int"):
        shared.StringList(["a", "b", 3])
    assert len(shared.StringList([])) == 0


def test_string_list_is_read_only_and_lives_outside_dev_shm():
    before = set(os.listdir("/dev/shm"))
    sl = shared.StringList(names(100))
    assert sl.block.sealed
    view = memoryview(sl.block)
    assert view.readonly
    with pytest.raises(TypeError):
        view[0] = 1
    assert set(os.listdir("/dev/shm")) == before


@pytest.mark.parametrize("ctx", ["fork", "spawn", "forkserver"])
def test_string_list_inside_a_dataset_in_workers(ctx):
    src = names(500)
    ds = NamesDataset(shared.StringList(src))
    loader = stoker.DataLoader(ds, batch_size=50, num_workers=2, multiprocessing_context=ctx)
    got = torch.cat(list(loader))
    assert got[:, 0].tolist() == list(range(500))
    assert got[:, 1].tolist() == [len(s) for s in src]


def test_string_list_works_with_torchs_dataloader_under_spawn():
    src = names(200)
    loader = torch.utils.data.DataLoader(NamesDataset(shared.StringList(src)), batch_size=20, num_workers=2,
                                         multiprocessing_context="spawn")
    got = torch.cat(list(loader))
    assert got[:, 1].tolist() == [len(s) for s in src]


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_array_writes_in_workers_are_seen_by_the_main_process(ctx):
    arr = shared.Array((64,), "int64")
    list(stoker.DataLoader(ArrayWriter(arr), batch_size=8, num_workers=2, multiprocessing_context=ctx))
    assert arr.numpy().tolist() == [i * 10 + 1 for i in range(64)]


def test_array_views_and_copies():
    a = shared.Array((3, 4), torch.float32)
    assert a.shape == (3, 4) and a.dtype == np.float32 and len(a) == 3 and a.nbytes == 48
    a[1] = 5
    t = a.torch()
    t[2, 3] = 9
    assert a.numpy()[2, 3] == 9 and np.asarray(a)[1].tolist() == [5] * 4, "views share memory"
    b = shared.Array.from_data(torch.arange(6).reshape(2, 3))
    assert b.dtype == np.int64 and b.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    c = pickle.loads(pickle.dumps(b))
    c[0, 0] = 100
    assert b[0, 0] == 100, "an unpickled array is the same memory, not a copy"
    with pytest.raises(ValueError, match="negative dimension"):
        shared.Array((2, -1))
    with pytest.raises(TypeError, match="StringList"):
        shared.Array((2,), object)


def test_a_pickled_container_reaches_an_unrelated_process_while_its_creator_lives():
    sl = shared.StringList(names(10))
    arr = shared.Array.from_data(np.arange(5.0))
    blob = pickle.dumps((sl, arr))
    code = textwrap.dedent("""
        import pickle, sys
        sl, arr = pickle.loads(sys.stdin.buffer.read())
        arr[0] = 42.0
        print(sl[3], len(sl), arr.numpy().sum())
    """)
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert out.stdout.decode().split() == [sl[3], "10", "52.0"]
    assert arr[0] == 42.0


def test_unpickling_after_the_creator_died_is_a_clear_error():
    code = textwrap.dedent("""
        import pickle, sys
        from stoker import shared
        sys.stdout.buffer.write(pickle.dumps(shared.StringList(["a", "b"])))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    blob = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env,
                          timeout=120).stdout
    with pytest.raises(RuntimeError, match="while the process that pickled it is alive"):
        pickle.loads(blob)


def _worker_uss_growth(container, tmp_path):
    """USS growth (bytes) of a forked child that reads every item."""
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.read(go_r, 1)  # wait until the parent measured us
        total = 0
        for i in range(len(container)):
            total += len(container[i])
        os.write(w, b"x")
        os.read(go_r, 1)
        os._exit(0)
    os.close(w)
    os.close(go_r)
    try:
        gc.collect()
        before = stoker._native.lib.process_memory(pid)["uss"]
        os.write(go_w, b"g")
        assert os.read(r, 1) == b"x"
        after = stoker._native.lib.process_memory(pid)["uss"]
        return after - before
    finally:
        os.write(go_w, b"q")
        os.waitpid(pid, 0)
        os.close(r)
        os.close(go_w)


def test_reading_a_string_list_in_a_forked_worker_copies_nothing(tmp_path):
    src = names(300_000)
    as_list = list(src)
    as_shared = shared.StringList(src)
    del src
    grown_list = _worker_uss_growth(as_list, tmp_path)
    grown_shared = _worker_uss_growth(as_shared, tmp_path)
    # The list's str objects are copied as their reference counts are
    # written (about 20 MB here); the StringList's bytes stay shared.
    assert grown_list > 10 << 20, f"the list should show copy-on-read ({grown_list} bytes)"
    assert grown_shared < 2 << 20, f"reading a StringList copied {grown_shared} bytes into the worker"
