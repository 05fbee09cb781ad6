"""Native datasets read by C++ threads into the pool."""
import os
import time

import numpy as np
import pytest
import torch

import stoker
from stoker import io
from stoker.bench import spin_rate
from leaks import children


@pytest.fixture
def files(tmp_path):
    a = (np.arange(203 * 12, dtype=np.float32) * 0.5).reshape(203, 3, 4)
    np.save(tmp_path / "a.npy", a)
    a.tofile(tmp_path / "a.bin")
    return a, tmp_path


def datasets(files):
    a, d = files
    return [io.NpyDataset(d / "a.npy"), io.RawDataset(d / "a.bin", "float32", (3, 4))]


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("batch_size", [8, None])
def test_native_datasets_give_torchs_batches(files, workers, batch_size):
    for ds in datasets(files):
        def kw():
            return dict(batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(3))
        ours = list(stoker.DataLoader(ds, num_workers=workers, **kw()))
        ref = list(torch.utils.data.DataLoader(ds, **kw()))
        assert len(ours) == len(ref)
        for x, y in zip(ours, ref):
            assert x.dtype == y.dtype and torch.equal(x, y)


def test_threads_not_processes(files):
    before = set(children())
    it = iter(stoker.DataLoader(datasets(files)[0], batch_size=4, num_workers=2))
    next(it)
    assert not set(children()) - before, "a native dataset needs no worker process"
    assert it._native_ds is not None and len(it.stats()["workers"]) == 2
    del it


def arena_mappings(it):
    """/proc/self/maps lines holding the iterator's slot arena."""
    base = it._engine.base_address
    with open("/proc/self/maps") as f:
        return [line for line in f if int(line.split("-")[0], 16) == base]


def test_native_readers_batch_into_private_memory_within_max_memory(tmp_path):
    # Threads share the process: the pool is private memory, not a memfd,
    # still bounded by max_memory, and unmapped with the iterator.
    a = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    np.save(tmp_path / "a.npy", a)
    it = iter(stoker.DataLoader(io.NpyDataset(tmp_path / "a.npy"), batch_size=8, num_workers=2,
                                max_memory=4 << 20))
    assert it._engine.fd == -1
    got = []
    for b in it:
        got.append(b.clone())
        maps = arena_mappings(it)
        assert len(maps) == 1 and "memfd" not in maps[0] and "/dev/shm" not in maps[0], maps
        assert 0 < it.stats(memory=False)["arena_bytes"] <= 4 << 20
    assert torch.equal(torch.cat(got), torch.from_numpy(a))
    base = it._engine.base_address
    del it, b
    with open("/proc/self/maps") as f:
        assert not any(int(line.split("-")[0], 16) == base for line in f), "the pool is unmapped with its loader"


def test_a_native_batch_is_readable_in_a_forked_child(files):
    # The pool is private memory: a fork shares it copy-on-write, so a child
    # given a batch tensor (multiprocessing with fork) reads the same values,
    # while the parent's readers go on writing the next batches.
    a, _ = files
    it = iter(stoker.DataLoader(datasets(files)[1], batch_size=8, num_workers=2))
    first = next(it)
    want = float(first.double().sum())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the sum of the inherited batch, or its error
        try:
            os.close(r)
            os.write(w, repr(float(first.double().sum())).encode())
        finally:
            os._exit(0)
    os.close(w)
    rest = [b.clone() for b in it]  # the parent's readers write while the child reads
    with os.fdopen(r) as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the child ended with status {status}"
    assert got and float(got) == want
    assert torch.equal(torch.cat([first] + rest), torch.from_numpy(a))


def test_a_python_collate_moves_the_work_to_processes(files):
    ds = datasets(files)[0]
    it = iter(stoker.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda s: torch.tensor(np.stack(s))))
    b = next(it)
    assert it._native_ds is None and b.shape == (4, 3, 4)
    assert it._engine.fd >= 0 and "memfd:stoker-arena" in arena_mappings(it)[0], "worker processes share a memfd"
    del it


def test_bad_files_are_clear_errors(tmp_path):
    (tmp_path / "r.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match=r"r\.bin: 100 bytes is not a whole number of 48-byte records"):
        io.RawDataset(tmp_path / "r.bin", "float32", (12,))
    with pytest.raises(OSError, match="nope.bin"):
        io.RawDataset(tmp_path / "nope.bin", "uint8", (4,))
    (tmp_path / "x.npy").write_bytes(b"not numpy at all")
    with pytest.raises(ValueError, match="bad magic"):
        io.NpyDataset(tmp_path / "x.npy")
    a = np.zeros((10, 4), np.float32)
    np.save(tmp_path / "t.npy", a)
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-20])
    with pytest.raises(ValueError, match="bytes short"):
        io.NpyDataset(tmp_path / "t.npy")
    np.save(tmp_path / "f.npy", np.asfortranarray(np.zeros((4, 3))))
    with pytest.raises(ValueError, match="Fortran"):
        io.NpyDataset(tmp_path / "f.npy")
    # The magic and the length are right, the header dict is garbage.
    header = b"garbage, not a dict".ljust(118) + b"\n"
    (tmp_path / "g.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 64)
    with pytest.raises(ValueError, match=r"g\.npy: the \.npy header is damaged .*found \"garbage, not a dict") as e:
        io.NpyDataset(tmp_path / "g.npy")
    assert "Fortran" not in str(e.value)


def test_a_file_truncated_after_opening_names_file_and_offset(tmp_path):
    a = np.zeros((16, 1024), np.float32)
    a.tofile(tmp_path / "g.bin")
    ds = io.RawDataset(tmp_path / "g.bin", "float32", (1024,))
    os.truncate(tmp_path / "g.bin", 4096 * 10)
    it = iter(stoker.DataLoader(ds, batch_size=4, num_workers=2))
    got = [next(it), next(it)]
    with pytest.raises(OSError, match=r"g\.bin ends at byte 40960.*truncated file.*batch 2.*indices \[8, 9, 10, 11\]"):
        next(it)
    assert all(b.shape == (4, 1024) for b in got)


def test_the_gil_is_free_while_native_threads_load(tmp_path):
    np.ones((64, 1 << 16), np.float32).tofile(tmp_path / "big.bin")  # 16 MiB
    loader = stoker.DataLoader(io.RawDataset(tmp_path / "big.bin", "float32", (1 << 16,)), batch_size=8,
                               num_workers=2, persistent_workers=True)
    batches = [0]

    def epoch():
        for _b in loader:
            batches[0] += 1

    idle = spin_rate(0.5)
    loading = spin_rate(1.0, epoch)
    assert batches[0] >= 8
    # Holding the GIL while reading would stop the Python thread almost
    # entirely; on 2 shared cores it keeps well over a third of its rate
    # (bench/native_read.py measures it at full rate).
    assert loading > 0.35 * idle, f"a Python thread ran at {loading / idle:.0%} of its idle rate"


def test_a_directory_of_npy_files(tmp_path):
    d = tmp_path / "samples"
    d.mkdir()
    for i in range(12):
        np.save(d / f"s{i:03d}.npy", np.full((2, 3), i, np.int16))
    ds = io.NpyDataset(d)
    assert len(ds) == 12
    got = torch.cat(list(stoker.DataLoader(ds, batch_size=4, num_workers=2)))
    assert got.dtype == torch.int16 and got.shape == (12, 2, 3) and got[:, 0, 0].tolist() == list(range(12))
    np.save(d / "s999.npy", np.zeros((3, 3), np.int16))  # one file unlike the others
    ds = io.NpyDataset(d)
    with pytest.raises(ValueError, match=r"s999\.npy: shape \(3,3,\) int16 differs from the first file's"):
        list(stoker.DataLoader(ds, batch_size=13, num_workers=1))


def test_native_dataset_resumes_mid_epoch(files):
    ds = datasets(files)[1]

    def make(seed):
        return stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2,
                                 generator=torch.Generator().manual_seed(seed))

    expected = [b.tolist() for b in make(1)]
    run = make(1)
    it = iter(run)
    before = [next(it).tolist() for _ in range(7)]
    state = run.state_dict()
    del it, run
    resumed = make(999)
    resumed.load_state_dict(state)
    assert before + [b.tolist() for b in resumed] == expected
