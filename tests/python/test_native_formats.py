"""TFRecord and tar shards, native transforms, writers, `stoker pack`,
bad input (raise, or skip and count), I/O modes."""
import os
import struct
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import torch

import stoker
from stoker import io
from crc32c_ref import crc32c
from leaks import children

# ---- a TFRecord reader and writer from the format spec (not stoker's code) -----

def masked(c: int) -> int:
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def spec_read_tfrecord(path):
    """Yields each record's data, checking both CRCs (TFRecord format spec)."""
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if not head:
                return
            (length,) = struct.unpack("<Q", head[:8])
            assert struct.unpack("<I", head[8:])[0] == masked(crc32c(head[:8])), "length CRC"
            data = f.read(length)
            assert struct.unpack("<I", f.read(4))[0] == masked(crc32c(data)), "data CRC"
            yield data


def _varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return v, i


def _fields(b):
    """(field number, wire type, value) of a protobuf message (wire format spec)."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        else:
            raise AssertionError(f"wire type {wt}")
        yield fn, wt, v


def spec_parse_example(data):
    """tf.train.Example -> {name: ('float'|'int64'|'bytes', values)}."""
    out = {}
    for fn, _, features in _fields(data):
        assert fn == 1
        for _, _, entry in _fields(features):
            key = value = None
            for efn, _, ev in _fields(entry):
                if efn == 1:
                    key = ev.decode()
                else:
                    value = ev
            for kind, _, lst in _fields(value):
                vals = []
                for _, wt, v in _fields(lst):
                    if kind == 2:  # float_list
                        vals += list(np.frombuffer(v, "<f4")) if wt == 2 else [struct.unpack("<f", v)[0]]
                    elif kind == 3:  # int64_list
                        if wt == 2:
                            j = 0
                            while j < len(v):
                                x, j = _varint(v, j)
                                vals.append(x - (1 << 64) if x >> 63 else x)
                        else:
                            vals.append(v - (1 << 64) if v >> 63 else v)
                    else:
                        vals.append(v)
                out[key] = ({1: "bytes", 2: "float", 3: "int64"}[kind], vals)
    return out


def _ld(fn, payload: bytes) -> bytes:
    n, out = len(payload), b""
    while True:
        out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    return bytes([fn << 3 | 2]) + out + payload


def spec_write_tfrecord(path, records):
    """records: list of {name: np.float32 array}; unpacked floats (wire type
    5), which TensorFlow's parser accepts and stoker's writer never emits."""
    with open(path, "wb") as f:
        for rec in records:
            feats = b""
            for name, arr in rec.items():
                flist = b"".join(b"\x0d" + struct.pack("<f", float(v)) for v in arr.reshape(-1))
                feats += _ld(1, _ld(1, name.encode()) + _ld(2, _ld(2, flist)))
            data = _ld(1, feats)
            head = struct.pack("<Q", len(data))
            f.write(head + struct.pack("<I", masked(crc32c(head))) + data + struct.pack("<I", masked(crc32c(data))))


# ---- fixtures ---------------------------------------------------------------------

N = 37


def samples(n=N):
    for i in range(n):
        yield {"x": (np.arange(12, dtype=np.float32) + i).reshape(3, 4), "y": i,
               "raw": np.array([i, -i, 7], dtype=np.int16).tobytes()}


FEATURES = {"x": ("float32", (3, 4)), "y": ("int64", ()), "raw": ("int16", (3,))}


@pytest.fixture
def tfr(tmp_path):
    path = tmp_path / "d.tfrecord"
    assert io.write_tfrecord(path, samples()) == N
    return path


def test_written_tfrecord_matches_the_format_spec(tfr):
    recs = [spec_parse_example(d) for d in spec_read_tfrecord(tfr)]
    assert len(recs) == N
    for i, r in enumerate(recs):
        assert r["x"][0] == "float" and r["x"][1] == list(np.arange(12, dtype=np.float32) + i)
        assert r["y"] == ("int64", [i])
        assert r["raw"] == ("bytes", [np.array([i, -i, 7], dtype=np.int16).tobytes()])


def test_reads_a_file_written_from_the_spec(tmp_path):
    path = tmp_path / "spec.tfrecord"
    recs = [{"v": np.arange(5, dtype=np.float32) * i, "w": np.array([i], np.float32)} for i in range(9)]
    spec_write_tfrecord(path, recs)
    ds = io.TFRecordDataset(path, {"v": ("float32", (5,)), "w": ("float64", ())})
    assert len(ds) == 9
    for i in range(9):
        assert np.array_equal(ds[i]["v"], recs[i]["v"]) and ds[i]["w"] == i


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("io_mode", ["pread", "mmap"])
def test_tfrecord_loader_matches_torch(tfr, workers, io_mode):
    ds = io.TFRecordDataset(tfr, FEATURES, io=io_mode)
    before = set(children())

    def kw():
        return dict(batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(1))
    ours = stoker.DataLoader(ds, num_workers=workers, **kw())
    ref = list(torch.utils.data.DataLoader(ds, **kw()))
    got = list(ours)
    assert not set(children()) - before, "TFRecord is read by threads, not processes"
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert set(a) == set(FEATURES)
        for k in FEATURES:
            assert torch.equal(a[k], b[k]), k
    assert sorted(torch.cat([b["y"] for b in got]).tolist()) == list(range(N))


def test_index_is_cached_beside_the_file_or_elsewhere(tfr, tmp_path, monkeypatch):
    ds = io.TFRecordDataset(tfr, FEATURES)
    assert ds.index_paths == [str(tfr) + ".stoker-index"] and os.path.exists(ds.index_paths[0])
    other = tmp_path / "idx"
    ds2 = io.TFRecordDataset(str(tfr), FEATURES, index_dir=other)
    assert ds2.index_paths[0].startswith(str(other))
    # Where the index cannot be written beside the file (here: a directory
    # squats on its name; a read-only directory acts the same), it goes to
    # the user's cache.
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "d.tfrecord").write_bytes(tfr.read_bytes())
    (ro / "d.tfrecord.stoker-index").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ds3 = io.TFRecordDataset(ro / "d.tfrecord", FEATURES)
    assert ds3.index_paths[0].startswith(str(tmp_path / "cache" / "stoker" / "index"))
    assert len(ds3) == N
    assert io.TFRecordDataset(ro / "d.tfrecord", FEATURES).index_paths == ds3.index_paths


def test_bad_crc_names_file_record_offset_then_skip_and_count(tfr):
    data = bytearray(tfr.read_bytes())
    offsets, at = [], 0
    while at < len(data):
        offsets.append(at)
        at += 16 + struct.unpack("<Q", data[at:at + 8])[0]
    data[offsets[11] + 12 + 20] ^= 0x01  # a data byte of record 11
    tfr.write_bytes(bytes(data))
    ds = io.TFRecordDataset(tfr, FEATURES)
    with pytest.raises(ValueError, match=rf"{tfr}, record 11 \(byte offset {offsets[11]}\): the data's CRC does not match") as e:
        list(stoker.DataLoader(ds, batch_size=4, num_workers=2))
    assert "indices [8, 9, 10, 11]" in str(e.value)
    skip = io.TFRecordDataset(tfr, FEATURES, on_error="skip")
    loader = stoker.DataLoader(skip, batch_size=4, num_workers=2)
    it = iter(loader)
    got = [b for b in it]
    ys = torch.cat([b["y"] for b in got]).tolist()
    assert ys == [i for i in range(N) if i != 11]
    assert [len(b["y"]) for b in got][2] == 3, "the bad record's batch is one short"
    st = it.stats(memory=False)["native"]
    assert st["skipped"] == 1 and "record 11" in st["last_skipped"]
    with pytest.raises(ValueError, match="batch_size=None"):
        iter(stoker.DataLoader(skip, batch_size=None, num_workers=1))


def test_wrong_feature_type_or_shape_is_clear(tfr):
    with pytest.raises(ValueError, match=r"record 0 \(byte offset 0\): feature 'x' is a float_list of 12 values; "
                                         r"declared float32 \(12, 2\) needs 24"):
        list(stoker.DataLoader(io.TFRecordDataset(tfr, {"x": ("float32", (12, 2))}), batch_size=2))
    with pytest.raises(ValueError, match="feature 'y' is a int64_list; declared float32 \\(\\) needs float_list"):
        io.TFRecordDataset(tfr, {"y": ("float32", ())})[0]
    with pytest.raises(ValueError, match="feature 'z' is missing from the record \\(it has "):
        io.TFRecordDataset(tfr, {"z": ("float32", ())})[0]
    with pytest.raises(ValueError, match="declare the features|dict name"):
        io.TFRecordDataset(tfr, {})
    with pytest.raises(ValueError, match="features must be a dict"):
        io.TFRecordDataset(tfr, [("x", "float32")])


def test_truncated_and_unreadable_files(tfr, tmp_path):
    data = tfr.read_bytes()
    tfr.write_bytes(data[:-7])
    with pytest.raises(ValueError, match=rf"{tfr}, record {N - 1} .*truncated"):
        io.TFRecordDataset(tfr, FEATURES)
    ds = io.TFRecordDataset(tfr, FEATURES, on_error="skip")
    assert len(ds) == N - 1 and ds.skipped == 1
    with pytest.raises(OSError, match="nothing.tfrecord"):
        io.TFRecordDataset(tmp_path / "nothing.tfrecord", FEATURES)
    with pytest.raises(ValueError, match="is not a regular file"):
        io.TFRecordDataset(tmp_path, FEATURES)
    with pytest.raises(FileNotFoundError, match="no files match"):
        io.TFRecordDataset(str(tmp_path / "*.nope"), FEATURES)


@pytest.mark.parametrize("io_mode", ["mmap", "pread"])
def test_file_truncated_while_open_is_an_error_not_a_crash(tfr, io_mode):
    ds = io.TFRecordDataset(tfr, FEATURES, io=io_mode)
    with open(tfr, "r+b") as f:
        f.truncate(os.path.getsize(tfr) // 2)  # mapped pages past here are gone
    assert ds[0]["y"] == 0
    with pytest.raises(ValueError, match=rf"{tfr}, record {N - 1} .*(runs past the end|truncated)"):
        ds[N - 1]


def test_tfrecord_resumes_exactly(tfr):
    ds = io.TFRecordDataset(tfr, FEATURES)

    def make():
        return stoker.DataLoader(ds, batch_size=3, shuffle=True, num_workers=2, seed=0,
                                 generator=torch.Generator().manual_seed(9))
    full = [b["y"].tolist() for b in make()]
    a = make()
    it = iter(a)
    head = [next(it)["y"].tolist() for _ in range(4)]
    state = a.state_dict()
    del it
    b = make()
    b.load_state_dict(state)
    assert head + [x["y"].tolist() for x in b] == full


# ---- tar shards -----------------------------------------------------------------

def tar_samples(n):
    for i in range(n):
        yield {"__key__": f"sample{i:04d}", "img.npy": np.full((2, 3), i, np.float32), "cls": i % 5,
               "txt": "x" * (i % 4), "bin": np.arange(4, dtype=np.int32) + i}


def test_tar_shards_written_read_by_tarfile_and_stoker(tmp_path):
    paths = io.write_tar_shards(tmp_path / "shards" / "s-%04d.tar", tar_samples(23), maxcount=10)
    assert [os.path.basename(p) for p in paths] == ["s-0000.tar", "s-0001.tar", "s-0002.tar"]
    with tarfile.open(paths[1]) as t:
        names = t.getnames()
        assert names[:4] == ["sample0010.img.npy", "sample0010.cls", "sample0010.txt", "sample0010.bin"]
        assert t.extractfile("sample0012.cls").read() == b"2"
        assert np.load(__import__("io").BytesIO(t.extractfile("sample0012.img.npy").read())).tolist() == [[12.0] * 3] * 2
    ds = io.TarShardDataset(str(tmp_path / "shards" / "s-*.tar"), fields={"img.npy": "npy", "cls": "int",
                                                                          "txt": "bytes", "bin": ("int32", (4,))})
    assert len(ds) == 23
    s = ds[13]
    assert s["img.npy"].shape == (2, 3) and s["cls"] == 3 and s["txt"] == b"x" and s["bin"][0] == 13
    got = list(stoker.DataLoader(ds, batch_size=4, num_workers=2))
    assert torch.cat([b["bin"][:, 0] for b in got]).tolist() == list(range(23))
    assert got[0]["img.npy"].shape == (4, 2, 3) and got[0]["cls"].tolist() == [0, 1, 2, 3]
    assert [t.tolist() for t in got[0]["txt"]] == [[], [120], [120, 120], [120, 120, 120]]
    # Inferred fields.
    inferred = io.TarShardDataset(paths)
    assert [f[0] for f in inferred.fields] == ["img.npy", "cls", "txt", "bin"]
    assert [f[3] for f in inferred.fields] == [False, False, True, True]


def test_tar_written_by_tarfile_with_long_names_and_pax(tmp_path):
    path = tmp_path / "py.tar"
    long_dir = "d" * 120
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for i in range(3):
            data = f"{i}".encode()
            info = tarfile.TarInfo(f"{long_dir}/k{i}.cls")
            info.size = len(data)
            t.addfile(info, __import__("io").BytesIO(data))
    assert [int(ds["cls"]) for ds in io.TarShardDataset(path)] == [0, 1, 2]
    pax = tmp_path / "pax.tar"
    with tarfile.open(pax, "w", format=tarfile.PAX_FORMAT) as t:
        data = b"41"
        info = tarfile.TarInfo("é" * 70 + "/key.cls")
        info.size = 2
        t.addfile(info, __import__("io").BytesIO(data))
    assert io.TarShardDataset(pax)[0]["cls"] == 41


def test_tar_member_outside_the_shard_is_refused_or_skipped(tmp_path):
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as t:
        for name, data in [("ok.cls", b"1"), ("../../etc/evil.cls", b"2"), ("fine.cls", b"3")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, __import__("io").BytesIO(data))
        link = tarfile.TarInfo("ln.cls")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        t.addfile(link)
    with pytest.raises(ValueError, match=rf"tar shard {path}, header at byte offset 1024: member "
                                         r"'../../etc/evil.cls' has a '..' component"):
        io.TarShardDataset(path)
    ds = io.TarShardDataset(path, on_error="skip")
    assert [int(s["cls"]) for s in ds] == [1, 3] and ds.skipped == 2
    assert "a link (to '/etc/passwd')" in ds.last_skipped


def test_tar_bad_member_in_a_batch_is_skipped(tmp_path):
    paths = io.write_tar_shards(tmp_path / "s-%d.tar", tar_samples(8))
    ds = io.TarShardDataset(paths, fields={"bin": ("int32", (5,))}, on_error="skip")  # every member is 16 bytes
    it = iter(stoker.DataLoader(ds, batch_size=4, num_workers=1))
    got = list(it)
    assert [len(b["bin"]) for b in got] == [0, 0]
    assert it.stats(memory=False)["native"]["skipped"] == 8
    strict = io.TarShardDataset(paths, fields={"bin": ("int32", (5,))})
    with pytest.raises(ValueError, match=r"sample 'sample0000' \(index 0\): member 'sample0000.bin' has 16 bytes; "
                                         r"declared int32 \(5,\) needs 20"):
        list(stoker.DataLoader(strict, batch_size=4))


# ---- transforms ------------------------------------------------------------------

@pytest.fixture
def images(tmp_path):
    a = np.random.default_rng(0).integers(0, 255, size=(20, 3, 8, 10), dtype=np.uint8)
    np.save(tmp_path / "img.npy", a)
    return a, io.NpyDataset(tmp_path / "img.npy")


def test_native_transforms_match_numpy(images):
    a, ds = images
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    t = ds.map(io.ArrayCompose([io.Cast("float32"), io.ArrayNormalize(mean, std), io.Crop((1, 2), (4, 5)),
                                io.Flip(-1, p=1.0), io.Reshape((3, -1))]))
    assert t.fields == [("", "float32", [3, 20], False)]
    ref = ((a.astype(np.float32) - np.array(mean, np.float32)[:, None, None]) /
           np.array(std, np.float32)[:, None, None])[:, :, 1:5, 2:7][..., ::-1].reshape(20, 3, 20)
    got = torch.cat(list(stoker.DataLoader(t, batch_size=6, num_workers=2)))
    assert np.allclose(got.numpy(), ref, rtol=1e-6)
    assert np.allclose(t[3], ref[3], rtol=1e-6)


def test_random_transforms_depend_on_seed_epoch_and_index_only(images):
    a, ds = images
    t = ds.map(io.ArrayCompose([io.ArrayRandomCrop((4, 4)), io.Flip(-1, 0.5)]), seed=7)

    def epoch(e, workers):
        loader = stoker.DataLoader(t, batch_size=5, num_workers=workers)
        loader.set_epoch(e)
        return torch.cat(list(loader))
    e0 = epoch(0, 2)
    assert torch.equal(e0, epoch(0, 1)) and torch.equal(e0, epoch(0, 3)), "any threads: the same crops"
    e1 = epoch(1, 2)
    assert not torch.equal(e0, e1), "another epoch: other crops"
    # Each output is a 4x4 window of its image (flipped or not).
    for i in range(20):
        img, out = a[i], e1[i].numpy()
        found = any(np.array_equal(img[:, r:r + 4, c:c + 4][..., ::f], out)
                    for r in range(5) for c in range(7) for f in (1, -1))
        assert found, i


def test_a_python_transform_moves_work_to_processes(images):
    a, ds = images
    m = ds.map(io.ArrayCompose([io.Cast("float32"), lambda x: x * 2, io.Crop((0, 0), (2, 2))]))
    assert isinstance(m, io.MappedDataset)
    before = set(children())
    it = iter(stoker.DataLoader(m, batch_size=4, num_workers=2))
    first = next(it)
    assert len(set(children()) - before) == 2, "worker processes run the Python step"
    assert torch.equal(first, torch.from_numpy(a[:4, :, :2, :2].astype(np.float32) * 2))
    del it


def test_transform_errors_are_clear(images):
    _, ds = images
    with pytest.raises(ValueError, match=r"window \(9, 9\) at \(0, 0\) does not fit shape \(3, 8, 10\)"):
        ds.map(io.Crop((0, 0), (9, 9)))
    with pytest.raises(ValueError, match="2 means for axis 0 of shape \\(3, 8, 10\\), which has 3"):
        ds.map(io.ArrayNormalize([1, 2], [1, 1]))
    with pytest.raises(ValueError, match="every std must be > 0"):
        io.ArrayNormalize(0, 0)


def test_the_old_names_of_the_array_transforms_still_work_and_say_the_new_ones(images):
    _, ds = images
    with pytest.warns(DeprecationWarning, match=r"stoker.io.Normalize is now stoker.io.ArrayNormalize") as w:
        t = io.Normalize(0.5, 0.25)
    assert w[0].filename == __file__  # the user's line
    assert isinstance(t, io.ArrayNormalize)
    with pytest.warns(DeprecationWarning, match="ArrayRandomCrop"):
        crop = io.RandomCrop((4, 4))
    with pytest.warns(DeprecationWarning, match="ArrayCompose"):
        both = io.Compose([t, crop])
    assert isinstance(both, io.ArrayCompose)
    new = ds.map(io.ArrayCompose([io.ArrayNormalize(0.5, 0.25), io.ArrayRandomCrop((4, 4))]), seed=3)
    old = ds.map(both, seed=3)
    for k in range(len(ds)):
        np.testing.assert_array_equal(new[k], old[k])


# ---- stoker pack, io modes --------------------------------------------------------

def test_stoker_pack_directory_of_npy(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(12):
        np.save(src / f"s{i:02d}.npy", np.full((4,), i, np.float32))
    (src / "readme.txt").write_text("not data")
    out = tmp_path / "out"
    stoker_bin = os.path.join(os.path.dirname(sys.executable), "stoker")
    cmd = [stoker_bin] if os.path.exists(stoker_bin) else [sys.executable, "-m", "stoker.cli"]
    r = subprocess.run(cmd + ["pack", str(src), str(out), "--format", "tfrecord", "--shard-samples", "5"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    shards = sorted(out.glob("*.tfrecord"))
    assert len(shards) == 3 and "12 samples" in r.stdout
    ds = io.TFRecordDataset([str(s) for s in shards], {"data": ("float32", (4,))})
    assert [int(ds[i]["data"][0]) for i in range(12)] == list(range(12))
    r = subprocess.run(cmd + ["pack", str(src), str(tmp_path / "tars"), "--format", "tar"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    t = io.TarShardDataset(sorted(str(p) for p in (tmp_path / "tars").glob("*.tar")))
    assert [int(s["npy"][0]) for s in t] == list(range(12))
    r = subprocess.run(cmd + ["pack", str(tmp_path / "missing"), str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "missing" in r.stderr


def test_direct_io_reads_the_same_or_says_why(tmp_path):
    a = np.arange(4096 * 3, dtype=np.float32).reshape(12, 1024)
    # O_DIRECT needs a file system that has it: the working directory's disk, not tmpfs.
    base = os.environ.get("STOKER_TEST_DISK_DIR", os.getcwd())
    path = os.path.join(base, f".stoker_direct_{os.getpid()}.bin")
    a.tofile(path)
    try:
        try:
            ds = io.RawDataset(path, "float32", (1024,), io="direct")
        except ValueError as e:
            assert "does not support O_DIRECT" in str(e)
            pytest.skip(str(e))
        got = torch.cat(list(stoker.DataLoader(ds, batch_size=5, num_workers=2)))
        assert np.array_equal(got.numpy(), a)
        assert np.array_equal(io.RawDataset(path, "float32", (1024,), io="mmap")[7], a[7])
    finally:
        os.unlink(path)
    with pytest.raises(ValueError, match="io='fast' is not one of"):
        io.RawDataset(path, "float32", (4,), io="fast")


@pytest.mark.parametrize("priority", ["low", "idle"])
def test_reader_priority_applies_to_the_reader_threads(images, priority):
    _, ds = images
    before = set(os.listdir("/proc/self/task"))
    it = iter(stoker.DataLoader(ds, batch_size=2, num_workers=2, reader_priority=priority))
    next(it)
    readers = [int(t) for t in set(os.listdir("/proc/self/task")) - before]
    policies = [os.sched_getscheduler(t) for t in readers]
    nices = [os.getpriority(os.PRIO_PROCESS, t) for t in readers]
    if priority == "idle":
        assert policies.count(os.SCHED_IDLE) == 2, policies
    else:
        assert nices.count(10) == 2, nices
    assert os.sched_getscheduler(0) == os.SCHED_OTHER and os.getpriority(os.PRIO_PROCESS, 0) == 0
    del it
    with pytest.raises(ValueError, match="reader_priority should be"):
        stoker.DataLoader(ds, reader_priority="high")


def test_writers_leave_whole_files_or_none(tmp_path):
    """write_tar_shards, write_tfrecord and write_index write under a
    temporary name and rename (core/atomic_file.h): a writer that fails
    midway leaves no partial file and no temporary one."""
    from stoker.cache import write_index
    from stoker.io import write_tar_shards, write_tfrecord

    def samples(bad_at):
        for i in range(10):
            if i == bad_at:
                yield "not a dict"
            yield {"__key__": f"k{i}", "cls": i}
    with pytest.raises(TypeError, match="sample 4"):
        write_tar_shards(str(tmp_path / "t-%02d.tar"), samples(4), maxcount=3)
    assert sorted(os.listdir(tmp_path)) == ["t-00.tar"]  # the closed shard only: no t-01.tar, no .tmp
    with pytest.raises(TypeError, match="sample 2"):
        write_tfrecord(tmp_path / "x.tfrecord", ({"a": 1} if i != 2 else 7 for i in range(5)))
    assert sorted(os.listdir(tmp_path)) == ["t-00.tar"]
    write_index(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["index.txt", "t-00.tar"]
    rows = [r for r in open(tmp_path / "index.txt").read().splitlines() if not r.startswith("#")]
    assert [r.split()[0] for r in rows] == ["t-00.tar"]
