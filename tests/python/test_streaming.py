"""StreamingDataset over a real nginx on 127.0.0.1: growth across
epochs, eviction under max_bytes (checked continuously, never a shard in
use), full mode exactly once, the server stopped mid-download, a corrupt
shard, a truncated response, a restart with a half-written file, two
loaders sharing one cache, resume, tar shards, stats.  One module (over 600
lines) so that one nginx serves all of them."""
import collections
import os
import resource
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import stoker
from stoker.cache import StreamingDataset, parse_shard_index, write_index
from stoker.io import write_tar_shards, write_tfrecord
from nginx import Nginx

N_SHARDS, PER_SHARD, WIDTH = 20, 50, 256
FEATURES = {"x": ("float32", (WIDTH,)), "y": ("int64", ())}


def make_shards(root, n=N_SHARDS):
    os.makedirs(root, exist_ok=True)
    for s in range(n):
        ids = range(s * PER_SHARD, (s + 1) * PER_SHARD)
        write_tfrecord(os.path.join(root, f"shard-{s:03d}.tfrecord"),
                       [{"x": np.full(WIDTH, i, np.float32), "y": np.int64(i)} for i in ids])
    write_index(root)
    return root


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    return make_shards(str(tmp_path_factory.mktemp("www")))


@pytest.fixture(scope="module")
def server(www, tmp_path_factory):
    n = Nginx(tmp_path_factory.mktemp("nginx"), www, slow_rate="400k").start()
    yield n
    n.stop()


def shard_size(www):
    return max(os.path.getsize(os.path.join(www, f)) for f in os.listdir(www) if f.endswith(".tfrecord"))


def ids_of(names):
    out = []
    for n in names:
        s = int(n.split("-")[1].split(".")[0])
        out.extend(range(s * PER_SHARD, (s + 1) * PER_SHARD))
    return out


def epoch_ys(loader):
    ys = []
    for b in loader:
        assert (b["x"][:, 0].long() == b["y"]).all() and (b["x"][:, -1].long() == b["y"]).all()
        ys.extend(b["y"].tolist())
    return ys


def cache_usage(local):
    """Bytes the cache directory holds in shards and partial downloads.  (A
    shard and its .part are counted once: a listing made while X.part is
    renamed to X may show both, and both never exist at once.)"""
    sizes = {}
    for f in os.listdir(local):
        if f.startswith(".") or f.endswith((".lock", ".reserve")):
            continue
        try:
            size = os.path.getsize(os.path.join(local, f))
        except FileNotFoundError:
            continue
        base = f[:-len(".part")] if f.endswith(".part") else f
        sizes[base] = max(sizes.get(base, 0), size)
    return sum(sizes.values())


class Monitor(threading.Thread):
    """Polls the cache directory's usage every millisecond or so."""

    def __init__(self, local):
        super().__init__(daemon=True)
        self.local, self.peak, self.samples, self.done = local, 0, 0, False

    def run(self):
        while not self.done:
            self.peak = max(self.peak, cache_usage(self.local))
            self.samples += 1
            time.sleep(0.001)

    def stop(self):
        self.done = True
        self.join()


def left_out_warnings(caught):
    return [str(w.message) for w in caught if "mode='cached' reads" in str(w.message)]


def test_by_default_a_cold_cache_epoch_is_the_whole_dataset_over_http(server, tmp_path):
    # As every peer (MosaicML Streaming, litData, WebDataset): the first
    # epoch over a cold cache is every sample once, and len() says so.
    ds = StreamingDataset(server.url + "/slow", str(tmp_path / "c"), max_bytes=1 << 30, features=FEATURES)
    assert ds.mode == "full" and len(ds) == N_SHARDS * PER_SHARD
    loader = stoker.DataLoader(ds, batch_size=25, shuffle=True, num_workers=2)
    assert len(loader) == N_SHARDS * PER_SHARD // 25
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
    assert not left_out_warnings(caught)
    st = ds.stats()
    assert st["epoch_shards_left_out"] == 0 and st["shards_left_out"] == 0 and st["fraction_seen"] == 1.0
    ds.close()


def test_cached_mode_over_a_cold_cache_reads_what_is_cached_and_says_so_once(server, tmp_path):
    ds = StreamingDataset(server.url + "/slow", str(tmp_path / "c"), max_bytes=1 << 30, mode="cached",
                          features=FEATURES, fetchers=1)
    loader = stoker.DataLoader(ds, batch_size=10, num_workers=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ys = epoch_ys(loader)
    have = len(ds.epoch_shards)
    assert 0 < have < N_SHARDS and sorted(ys) == sorted(ids_of(ds.epoch_shards))
    assert len(ds) == have * PER_SHARD
    msgs = left_out_warnings(caught)
    assert len(msgs) == 1 and f"reads {have} of its {N_SHARDS} shards this epoch ({have * PER_SHARD} of " \
        f"{N_SHARDS * PER_SHARD} samples)" in msgs[0] and "mode='full' (the default)" in msgs[0], msgs
    assert caught[[str(w.message) for w in caught].index(msgs[0])].filename == __file__  # the user's line
    st = ds.stats()
    assert st["epoch_shards_left_out"] == N_SHARDS - have and st["shards_left_out"] >= N_SHARDS - have
    with warnings.catch_warnings(record=True) as caught:  # once per dataset
        warnings.simplefilter("always")
        epoch_ys(loader)
    assert not left_out_warnings(caught)
    assert ds.stats()["shards_left_out"] > st["shards_left_out"] or len(ds.epoch_shards) == N_SHARDS
    ds.close()


def test_growing_is_the_old_name_of_cached_mode(server, tmp_path):
    with pytest.warns(DeprecationWarning, match="mode='growing' is now called mode='cached'"):
        ds = StreamingDataset(server.url, str(tmp_path / "c"), max_bytes=1 << 30, mode="growing", features=FEATURES)
    assert ds.mode == "cached"
    ds.close()
    with pytest.raises(ValueError, match="mode='sometimes' is not one of 'full', 'cached'"):
        StreamingDataset(server.url, str(tmp_path / "d"), max_bytes=1 << 30, mode="sometimes", features=FEATURES)


def test_growing_mode_grows_across_epochs(server, www, tmp_path):
    local = str(tmp_path / "cache")
    ds = StreamingDataset(server.url + "/slow", local, max_bytes=1 << 30, mode="cached", features=FEATURES, fetchers=2)
    loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=2)
    sizes = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ys = epoch_ys(loader)
        # Every sample of the epoch's shards, once.
        assert sorted(ys) == sorted(ids_of(ds.epoch_shards))
        sizes.append(len(ds.epoch_shards))
        if sizes[-1] == N_SHARDS:
            break
        time.sleep(0.1)
    assert sizes[-1] == N_SHARDS, sizes
    assert sizes == sorted(sizes) and sizes[0] < N_SHARDS and len(set(sizes)) >= 3, sizes
    st = ds.stats()
    assert st["cached_shards"] == N_SHARDS and st["downloads"] == N_SHARDS and st["fraction_seen"] == 1.0
    assert st["fetch_bytes_per_s"] > 0 and st["evictions"] == 0 and st["fetch_errors"] == 0
    # Everything is cached now: the next epoch is all hits, nothing in flight.
    assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
    st = ds.stats()
    assert st["bytes_in_flight"] == 0 and st["hits"] > 0 and 0 < st["hit_rate"] < 1
    ds.close()


def test_growing_mode_turns_over_within_max_bytes_never_evicting_a_shard_in_use(server, www, tmp_path):
    local = str(tmp_path / "cache")
    max_bytes = 6 * shard_size(www)
    ds = StreamingDataset(server.url + "/slow", local, max_bytes=max_bytes, mode="cached", features=FEATURES, fetchers=2,
                          shuffle_window=1, eviction="oldest")
    mon = Monitor(local)
    mon.start()
    # In order (no shuffle): a shard whose samples are all still ahead of the
    # loop has not been read; it must be on disk (pinned since the epoch began).
    loader = stoker.DataLoader(ds, batch_size=10, num_workers=2)
    ahead = 2 * 2 * 10  # samples the reader threads may be ahead of the loop
    epochs = 0
    deadline = time.monotonic() + 150
    try:
        while ds.stats()["seen_shards"] < N_SHARDS and time.monotonic() < deadline:
            names = None
            delivered = 0
            for b in loader:
                names = names or list(ds.epoch_shards)
                assert b["y"].tolist() == ids_of(names)[delivered:delivered + len(b["y"])]
                delivered += len(b["y"])
                for j, n in enumerate(names):
                    if j * PER_SHARD >= delivered + ahead:
                        assert os.path.exists(os.path.join(local, n)), f"{n} was evicted while in use"
                time.sleep(0.002)
            assert delivered == len(names) * PER_SHARD
            epochs += 1
    finally:
        mon.stop()
    st = ds.stats()
    assert st["seen_shards"] == N_SHARDS, st  # the local set turned over the whole remote dataset
    assert st["evictions"] > 0 and st["used_bytes"] <= max_bytes
    assert mon.samples > 100 and mon.peak <= max_bytes, (mon.peak, max_bytes)
    ds.close()


def tiny_shards(remote, n):
    """A directory store of n copies of one 2-sample shard (many shards, few
    bytes: the directory's work shows); the store and the shard's bytes."""
    remote.mkdir()
    write_tfrecord(str(remote / "shard-000000.tfrecord"),
                   [{"x": np.full(WIDTH, i, np.float32), "y": np.int64(i)} for i in range(2)])
    data = (remote / "shard-000000.tfrecord").read_bytes()
    for k in range(1, n):
        (remote / f"shard-{k:06d}.tfrecord").write_bytes(data)
    write_index(str(remote))
    return remote, data


def test_a_cache_full_of_shards_in_use_waits_without_burning_a_core(tmp_path):
    # A growing cache at an epoch's start: every cached shard is the epoch's,
    # in use, and nothing can be evicted until the readers are done with some.
    # Each look for room scans the directory (a stat and a lock attempt per
    # shard): the fetchers looked every 200 ms and kept a core busy with 2,000
    # shards.  Now they wait for a release (at once) or look again after a
    # wait that doubles up to 5 s.
    cached, total = 2000, 2100
    remote, data = tiny_shards(tmp_path / "remote", total)
    local = tmp_path / "cache"
    local.mkdir()
    for k in range(cached):
        (local / f"shard-{k:06d}.tfrecord").write_bytes(data)
    ds = StreamingDataset(str(remote), str(local), max_bytes=cached * len(data), mode="cached", features=FEATURES, fetchers=2)
    try:
        # (at open, before the first epoch takes its shards, a fetcher may
        # evict one to download another: the cache is full and none is in use)
        assert ds.stats()["epoch_shards"] >= cached - 2
        deadline = time.monotonic() + 60
        while "is full" not in ds.stats()["last_fetch_error"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "is full" in ds.stats()["last_fetch_error"], ds.stats()
        time.sleep(1)
        downloads = ds.stats()["downloads"]
        cpu0, t0 = time.process_time(), time.monotonic()
        time.sleep(5)
        busy = (time.process_time() - cpu0) / (time.monotonic() - t0)
        assert busy < 0.07, f"the fetchers used {busy:.0%} of a core waiting for room"  # (before: 0.14; now 0.01-0.02)
        assert ds.stats()["downloads"] == downloads
        # The readers release the shards they are done with: the fetchers
        # evict those and download at once, within max_bytes.
        assert len(epoch_ys(stoker.DataLoader(ds, batch_size=100, num_workers=2))) == 2 * ds.stats()["epoch_shards"]
        deadline = time.monotonic() + 60
        while ds.stats()["downloads"] < total - cached and time.monotonic() < deadline:
            time.sleep(0.05)
        st = ds.stats()
        assert st["downloads"] >= total - cached and st["evictions"] > 0, st
        assert st["used_bytes"] <= cached * len(data), st
    finally:
        ds.close()


def test_an_epoch_over_thousands_of_cached_shards_does_not_stat_them_all_per_shard(tmp_path):
    # Every remote shard cached (a dataset that fits the cache): the fetchers
    # have nothing to fetch, and each shard a reader is done with wakes them.
    # Looking for a shard to fetch was a stat of every cached shard, under the
    # lock the readers take, on every wake-up: an epoch of N shards cost N * N
    # stats (4,000 shards of 2 samples: 20-37 s for a second epoch, 0.3 s now).
    # The fetchers now look at the directory once a second at most.
    n = 4000
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2 * n:
        pytest.skip(f"an epoch of {n} shards holds each open: needs `ulimit -Hn` of {2 * n}")
    remote, data = tiny_shards(tmp_path / "remote", n)
    local = tmp_path / "cache"
    local.mkdir()
    for k in range(n):
        (local / f"shard-{k:06d}.tfrecord").write_bytes(data)
    ds = StreamingDataset(str(remote), str(local), max_bytes=2 * n * len(data), mode="cached", features=FEATURES, fetchers=2)
    try:
        assert ds.stats()["epoch_shards"] == n
        loader = stoker.DataLoader(ds, batch_size=100, num_workers=2)
        assert len(epoch_ys(loader)) == 2 * n  # (the first epoch writes each shard's record index)
        t0 = time.monotonic()
        loader.set_epoch(1)
        assert len(epoch_ys(loader)) == 2 * n
        took = time.monotonic() - t0
        assert took < 6, f"an epoch over {n} cached shards took {took:.1f} s (0.3 s here; 20-37 s before)"
        assert ds.stats()["downloads"] == 0
    finally:
        ds.close()


def test_more_cached_shards_than_open_files_is_a_clear_error(tmp_path):
    # A growing epoch holds each cached shard open.  With more shards than
    # the process may open, the epoch used to leave out the ones it could
    # not open and the process ran out of descriptors (EMFILE in whatever
    # opened a file next); now iter() says so, and how to fix it.
    remote, data = tiny_shards(tmp_path / "remote", 450)
    local = tmp_path / "cache"
    child = textwrap.dedent(f"""
        import os, resource, shutil, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (600, 600))
        import stoker
        from stoker.cache import StreamingDataset
        remote, local, n = {str(remote)!r}, {str(local)!r}, int(sys.argv[1])
        shutil.rmtree(local, ignore_errors=True)
        os.makedirs(local)
        for k in range(n):
            shutil.copyfile(os.path.join(remote, f"shard-{{k:06d}}.tfrecord"), os.path.join(local, f"shard-{{k:06d}}.tfrecord"))
        try:  # (a growing dataset takes its first epoch's shards when it opens)
            ds = StreamingDataset(remote, local, max_bytes=n * {len(data)}, mode="cached", fetchers=1, min_shards=n,
                                  features={{"x": ("float32", ({WIDTH},)), "y": ("int64", ())}})
            print(sum(len(b["y"]) for b in stoker.DataLoader(ds, batch_size=50, num_workers=2)))
            ds.close()
        except OSError as e:
            print("OSError", e.errno, e)
        open(os.devnull).close()  # the process can still open files
        """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    ok = subprocess.run([sys.executable, "-c", child, "100"], env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip() == "200", ok.stdout + ok.stderr[-3000:]
    bad = subprocess.run([sys.executable, "-c", child, "400"], env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 0, bad.stderr[-3000:]
    assert bad.stdout.startswith("OSError "), bad.stdout + bad.stderr[-3000:]
    for what in ("the 400 shards cached now", "ulimit -Hn", "Too many open files (errno 24)"):
        assert what in bad.stdout, bad.stdout


def test_lru_eviction_option(server, www, tmp_path):
    ds = StreamingDataset(server.url, str(tmp_path / "c"), max_bytes=4 * shard_size(www), mode="cached", features=FEATURES,
                          eviction="lru", min_shards=4)
    loader = stoker.DataLoader(ds, batch_size=25, shuffle=True, num_workers=1)
    for _ in range(4):
        assert sorted(epoch_ys(loader)) == sorted(ids_of(ds.epoch_shards))
        time.sleep(0.05)
    assert ds.stats()["used_bytes"] <= 4 * shard_size(www)
    with pytest.raises(ValueError, match="eviction='newest' is not one of 'oldest', 'lru'"):
        StreamingDataset(server.url, str(tmp_path / "d"), max_bytes=1 << 30, features=FEATURES, eviction="newest")


def test_full_mode_every_sample_once_per_epoch_through_a_small_cache(server, www, tmp_path):
    local = str(tmp_path / "cache")
    max_bytes = 5 * shard_size(www)
    ds = StreamingDataset(server.url, local, max_bytes=max_bytes, mode="full", features=FEATURES,
                          shuffle_window=2, prefetch=2)
    assert len(ds) == N_SHARDS * PER_SHARD
    mon = Monitor(local)
    mon.start()
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, seed=3)
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        ys = epoch_ys(loader)
        assert sorted(ys) == list(range(N_SHARDS * PER_SHARD))
        orders.append(ys)
    mon.stop()
    assert orders[0] != orders[1]  # reshuffled per epoch
    st = ds.stats()
    # The cache keeps what it has room for (read from disk in epoch 2), the
    # rest streams through memory buffers; nothing is evicted.
    assert st["evictions"] == 0 and st["fraction_seen"] == 1.0 and st["hits"] >= 4
    assert st["streamed"] >= 2 * (N_SHARDS - 5) and st["downloads"] == st["streamed"] + st["cached_shards"]
    # 2 * shuffle_window + fetchers buffers by default, in whole pages.
    assert st["stream_buffers"] == 2 * 2 + 2
    assert 0 < st["stream_buffer_bytes"] <= (2 * 2 + 2) * (shard_size(www) + 4095)
    assert st["stream_huge_pages"] is False  # (shards under 2 MiB: whole small pages)
    assert mon.peak <= max_bytes
    assert mapped_shards(local) == set(), "shards a smaller cache may evict are not held between epochs"
    # Shard by shard: each stretch of 2 shards' samples (a shuffle window) is 2 shards, mixed.
    for ys in orders:
        windows = [ys[i:i + 2 * PER_SHARD] for i in range(0, len(ys), 2 * PER_SHARD)]
        assert all(len({y // PER_SHARD for y in w}) == 2 for w in windows)
        assert any(w != sorted(w) for w in windows)


def mapped_shards(local):
    """Names of the files in `local` this process maps."""
    with open("/proc/self/maps") as f:
        paths = [line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6]
    return {os.path.basename(p) for p in paths if os.path.dirname(p) == local}


def test_full_mode_with_room_for_every_shard_keeps_them_open_between_epochs(server, www, tmp_path):
    """As a native dataset keeps its files: a cached shard is not unmapped
    after an epoch and mapped (and faulted in) again for the next."""
    local = str(tmp_path / "cache")
    ds = StreamingDataset(server.url, local, max_bytes=2 * N_SHARDS * shard_size(www), mode="full", features=FEATURES)
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2)
    names = {f"shard-{s:03d}.tfrecord" for s in range(N_SHARDS)}
    for epoch in range(3):
        loader.set_epoch(epoch)
        assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
        assert mapped_shards(local) == names
    st = ds.stats()
    assert st["downloads"] == N_SHARDS and st["hits"] == 2 * N_SHARDS and st["cached_shards"] == N_SHARDS, st
    ds.close()
    assert mapped_shards(local) == set(), "close() lets them go"


KEPT_OPEN_SCRIPT = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
sys.path[:0] = sys.argv[3].split(os.pathsep)
import stoker
from stoker.cache import StreamingDataset
from test_streaming import FEATURES, mapped_shards
ds = StreamingDataset(sys.argv[1], sys.argv[2], max_bytes=1 << 30, mode="full", features=FEATURES)
loader = stoker.DataLoader(ds, batch_size=16, num_workers=2)
for epoch in range(2):
    n = sum(len(b["y"]) for b in loader)
    print(n, len(mapped_shards(sys.argv[2])))
ds.close()
"""


def test_shards_kept_open_are_bounded_by_the_open_file_limit(server, tmp_path):
    """An eighth of the descriptors at most (each kept shard holds two): with
    a limit of 128, 16 of the 20 shards stay open and the rest are opened
    again each epoch."""
    out = subprocess.run([sys.executable, "-c", KEPT_OPEN_SCRIPT, server.url, str(tmp_path / "cache"),
                          os.pathsep.join(sys.path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [str(N_SHARDS * PER_SHARD), "16"] * 2, out.stdout


def test_full_mode_without_a_cache_streams_everything_through_memory(server, www, tmp_path):
    local = str(tmp_path / "cache")
    ds = StreamingDataset(server.url, local, max_bytes=0, mode="full", features=FEATURES, shuffle_window=2,
                          prefetch=3, stream_buffers=4)
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, seed=5)
    for epoch in range(2):
        loader.set_epoch(epoch)
        assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
    st = ds.stats()
    assert st["streamed"] == st["downloads"] == 2 * N_SHARDS and st["hits"] == 0 and st["cached_shards"] == 0
    assert st["used_bytes"] == 0 and st["evictions"] == 0
    assert [f for f in os.listdir(local) if not f.startswith(".")] == []  # nothing written
    # stream_buffers=4: made as the fetchers needed them, never more.
    assert st["stream_buffers"] == 4
    assert 0 < st["stream_buffer_bytes"] <= 4 * ((shard_size(www) + 4095) // 4096 * 4096)
    ds.close()
    # Shards the directory holds already are still read from it.
    shutil.copy(os.path.join(www, "shard-003.tfrecord"), local)
    ds = StreamingDataset(server.url, local, max_bytes=0, mode="full", features=FEATURES, shuffle_window=2)
    assert sorted(epoch_ys(stoker.DataLoader(ds, batch_size=16, num_workers=2))) == list(range(N_SHARDS * PER_SHARD))
    st = ds.stats()
    assert st["hits"] == 1 and st["streamed"] == N_SHARDS - 1
    ds.close()
    with pytest.raises(ValueError, match="max_bytes=0 \\(no cache\\) is for mode='full'"):
        StreamingDataset(server.url, local, max_bytes=0, mode="cached", features=FEATURES)


def format_cpus(cpus):
    """A sorted CPU list as Linux writes one ("1", "6-7", "2,5")."""
    runs = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def stoker_threads():
    """{name: [Cpus_allowed_list of each]} of this process's threads named stoker-*."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/self/task/{tid}/status") as f:
                cpus = next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list:"))
        except (OSError, StopIteration):
            continue  # (a thread that ended meanwhile)
        if comm.startswith("stoker-"):
            out.setdefault(comm, []).append(cpus)
    return out


def test_fetcher_cpus_confines_the_fetchers_and_names_a_cpu_it_cannot_use(server, www, tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    with open("/proc/self/status") as f:  # this process's CPUs, as Linux writes them
        everywhere = next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list:"))
    cpu = allowed[-1]
    ds = StreamingDataset(server.url, str(tmp_path / "a"), max_bytes=0, mode="full", features=FEATURES, fetchers=3,
                          fetcher_cpus=[cpu], shuffle_window=2)
    assert stoker_threads()["stoker-fetch"] == [str(cpu)] * 3
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2)
    ys, readers = [], None
    for b in loader:  # every sample, downloaded by the confined fetchers
        readers = readers or stoker_threads().get("stoker-reader")
        ys.extend(b["y"].tolist())
    assert sorted(ys) == list(range(N_SHARDS * PER_SHARD))
    assert ds.stats()["downloads"] == N_SHARDS
    assert ds.stats()["fetchers"] == 3 and ds.stats()["fetcher_cpus"] == [cpu]
    assert ds.stats()["fetcher_placement"] == "given"
    assert readers is not None and len(readers) == 2  # the loader's reader threads are named too
    ds.close()
    assert "stoker-fetch" not in stoker_threads()
    # Unset, with the server on this machine (nginx on 127.0.0.1): the fetchers
    # keep to the last quarter of the process's CPUs, leaving the server the
    # rest; on one CPU there is nothing to keep apart.  How many is chosen for
    # the store.
    beside = allowed[-max(1, len(allowed) // 4):] if len(allowed) > 1 else []
    ds = StreamingDataset(server.url, str(tmp_path / "b"), max_bytes=0, mode="full", features=FEATURES,
                          shuffle_window=2)
    assert stoker_threads()["stoker-fetch"] == [format_cpus(beside) if beside else everywhere] * 2
    assert ds.stats()["fetchers"] == 2 and ds.stats()["fetcher_cpus"] == beside
    assert ds.stats()["fetcher_placement"] == ("beside the store's server" if beside else "anywhere")
    ds.close()
    # A directory has no server: anywhere.
    ds = StreamingDataset(str(www), str(tmp_path / "d"), max_bytes=0, mode="full", features=FEATURES, shuffle_window=2)
    assert stoker_threads()["stoker-fetch"] == [everywhere] * 2
    assert ds.stats()["fetcher_cpus"] == [] and ds.stats()["fetcher_placement"] == "anywhere"
    ds.close()
    ds = StreamingDataset(server.url, str(tmp_path / "b"), max_bytes=0, mode="full", features=FEATURES, fetchers=2,
                          shuffle_window=2, fetcher_cpus=np.array([cpu]))  # (numpy integers are CPU numbers too)
    assert stoker_threads()["stoker-fetch"] == [str(cpu)] * 2
    ds.close()
    beyond = allowed[-1] + 1
    with pytest.raises(ValueError, match=f"fetcher_cpus: CPU {beyond} is not one this process may run on \\(its CPU"):
        StreamingDataset(server.url, str(tmp_path / "c"), max_bytes=0, mode="full", features=FEATURES,
                         fetcher_cpus=[cpu, beyond])
    for bad, match in (([], "fetcher_cpus is empty"), ("0", "should be CPU numbers"), ([True], "got True"),
                       ([-1], "got -1"), ([1.0], "got 1.0"), (3, "should be CPU numbers")):
        with pytest.raises(ValueError, match=match):
            StreamingDataset(server.url, str(tmp_path / "c"), max_bytes=0, mode="full", features=FEATURES,
                             fetcher_cpus=bad)
    assert "stoker-fetch" not in stoker_threads()  # (a refused dataset leaves no thread behind)


def test_full_mode_readers_far_apart_in_the_order_do_not_wait_for_buffers_forever(tmp_path):
    # Batches of 100 samples over shards of 2: each reader works through 12
    # shuffle windows of its own, so the readers need more shards at once
    # than the default 12 stream buffers hold.  The epoch hung: the fetchers'
    # prefetches (shards ahead in the order) held the buffers, and the
    # shards the readers waited for got none.  Now a prefetched shard no
    # reader has come to gives its buffer up, and where the readers hold
    # every buffer one more is made (and unmapped when it comes back).
    n = 300
    remote, data = tiny_shards(tmp_path / "remote", n)
    ds = StreamingDataset(str(remote), str(tmp_path / "cache"), max_bytes=0, mode="full", features=FEATURES,
                          fetchers=2)  # (shuffle_window 4: 12 stream buffers)
    try:
        for workers, epochs in ((2, 3), (6, 1)):  # (6 readers hold more shards than there are buffers)
            loader = stoker.DataLoader(ds, batch_size=100, shuffle=True, num_workers=workers,
                                       timeout=60)  # (a hang fails here, not at the watchdog)
            for e in range(epochs):
                loader.set_epoch(e)
                assert sorted(epoch_ys(loader)) == sorted([0, 1] * n)
        st = ds.stats()
        assert st["streamed"] >= 4 * n and st["downloads"] == st["streamed"], st
        capacity = 4096  # (a stream buffer is the largest shard, rounded up to pages)
        assert len(data) <= capacity
        assert st["stream_buffer_bytes"] <= 12 * capacity, st  # the default count, once the readers let go
    finally:
        ds.close()


def test_full_mode_epochs_left_early_give_their_buffers_back(tmp_path):
    # A loop that breaks after a few batches (a step budget, an error) leaves
    # the epoch with shards it never released.  Their stream buffers stayed
    # taken: after a few such epochs none was left and the next epoch hung.
    # Now an epoch no reader or fetcher holds any more frees its buffers.
    n = 40
    remote, data = tiny_shards(tmp_path / "remote", n)
    ds = StreamingDataset(str(remote), str(tmp_path / "cache"), max_bytes=0, mode="full", features=FEATURES,
                          fetchers=2)  # (12 stream buffers)
    try:
        loader = stoker.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                   timeout=60)  # (a hang fails here, not at the watchdog)
        for e in range(12):
            loader.set_epoch(e)
            for i, _ in enumerate(loader):
                if i == 1:
                    break
        loader.set_epoch(12)
        assert sorted(epoch_ys(loader)) == sorted([0, 1] * n)
        assert ds.stats()["stream_buffer_bytes"] <= 12 * 4096, ds.stats()
    finally:
        ds.close()


def test_full_mode_prefetches_as_soon_as_the_epochs_order_is_known(server, tmp_path):
    """The fetchers start on an epoch's first shards when the sampler orders
    it (iter() of a loader), before any reader asks: the first shuffle window
    alone until it is in (the first batch needs all of it), then on to
    `prefetch` shards ahead."""
    ds = StreamingDataset(server.url + "/slow", str(tmp_path / "cache"), max_bytes=0, mode="full",
                          features=FEATURES, shuffle_window=2, prefetch=3, fetchers=3)
    order = iter(ds.sampler(shuffle=True, seed=3))
    next(order)  # begins and orders epoch 0; nothing is read
    most_at_first = 0  # shards in flight before the first window is in (0.13 s each at 400 KB/s)
    deadline = time.monotonic() + 30
    while ds.stats()["downloads"] < 4 and time.monotonic() < deadline:
        st = ds.stats()
        if st["downloads"] + st["shards_in_flight"] <= 2:
            most_at_first = max(most_at_first, st["shards_in_flight"])
        else:
            assert st["downloads"] >= 2, f"a third shard started before the first window was in: {st}"
        time.sleep(0.002)
    time.sleep(0.3)
    st = ds.stats()
    assert most_at_first == 2, most_at_first  # the window's two shards at once
    assert st["downloads"] == 4 and st["shards_in_flight"] == 0, st  # places 0..3 of the order, no further
    ds.close()


def test_full_mode_downloads_each_shard_once_with_the_default_buffers(server, tmp_path):
    """At a shuffle window's end the readers finish it while they start the
    next, all of whose shards its first batch needs: the default buffers
    (2 * shuffle_window + fetchers) hold both, the prefetch starts at the
    furthest read's window, and a prefetch leaves a buffer for each shard
    read before it that has none; so no prefetched shard is taken back for
    a reader's and downloaded twice.  (With one window and the fetchers
    only, 1 fresh dataset in 5 here downloaded a shard twice.)"""
    for rep in range(10):
        ds = StreamingDataset(server.url, str(tmp_path / f"c{rep}"), max_bytes=0, mode="full", features=FEATURES,
                              shuffle_window=2)
        loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, seed=rep)
        assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
        st = ds.stats()
        assert st["downloads"] == N_SHARDS and st["prefetches_dropped"] == 0, (rep, st)
        ds.close()


def test_fetchers_left_to_the_dataset_grow_while_each_connection_adds(server, tmp_path):
    """fetchers=None: the dataset starts at the store's preference (2 for
    HTTP) and adds a connection while the readers wait for shards and each
    one added raises the download rate by a tenth (FetcherScaling).  Here
    nginx holds each connection to 400 KB/s (/slow/), so more connections are
    faster: more than 2 run within a few epochs, and every sample still comes
    once an epoch.  Given as a number, the fetchers stay as many."""
    ds = StreamingDataset(server.url + "/slow", str(tmp_path / "auto"), max_bytes=0, mode="full",
                          features=FEATURES, shuffle_window=2, prefetch=8)
    loader = stoker.DataLoader(ds, batch_size=25, shuffle=True, num_workers=2)
    most, epoch, deadline = 2, 0, time.monotonic() + 90
    while most <= 2 and time.monotonic() < deadline:
        loader.set_epoch(epoch)
        assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
        most = max(most, ds.stats()["fetchers"])
        epoch += 1
    st = ds.stats()
    assert most > 2, st
    assert st["fetchers_auto"] and st["fetchers_most"] == 8 and st["fetchers_tried"] >= 1, st
    assert st["stream_buffers"] == 2 * 2 + st["fetchers"], st  # the buffers follow the fetchers
    ds.close()
    fixed = StreamingDataset(server.url + "/slow", str(tmp_path / "fixed"), max_bytes=0, mode="full",
                             features=FEATURES, shuffle_window=2, prefetch=8, fetchers=2)
    loader = stoker.DataLoader(fixed, batch_size=25, shuffle=True, num_workers=2)
    for e in range(min(epoch, 3)):
        loader.set_epoch(e)
        assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD))
    st = fixed.stats()
    assert st["fetchers"] == 2 and not st["fetchers_auto"] and st["fetchers_most"] == 2, st
    assert st["fetchers_tried"] == 0, st
    fixed.close()


def test_full_mode_without_memory_for_its_buffers_fails_at_open(server, tmp_path):
    """The stream buffers are made as the fetchers need them, but a pool the
    process cannot map (ulimit -v) is a MemoryError naming stream_buffers at
    open, not a failure in an epoch."""
    code = textwrap.dedent(f"""
        import resource
        from stoker.cache import StreamingDataset
        with open("/proc/self/status") as f:
            vm = next(int(l.split()[1]) for l in f if l.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))
        try:
            StreamingDataset({server.url!r}, {str(tmp_path / "c")!r}, max_bytes=0, mode="full",
                             features={FEATURES!r}, stream_buffers=40000)
        except MemoryError as e:
            print("MemoryError:", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "MemoryError:" in out.stdout and "stream_buffers" in out.stdout, out.stdout + out.stderr


def test_full_mode_needs_counts_and_room(server, www, tmp_path):
    shards = [(n, size, crc) for n, size, crc, _ in parse_shard_index(open(os.path.join(www, "index.txt")).read(), "i")]
    with pytest.raises(ValueError, match="mode 'full' \\(the default\\) needs every shard's number of samples.*"
                                         "stoker index DIR.*or use mode 'cached'"):
        StreamingDataset(server.url, str(tmp_path / "a"), 1 << 30, mode="full", features=FEATURES, shards=shards)
    with pytest.raises(ValueError, match="stream_buffers \\(2\\) must be more than shuffle_window \\(2\\)"):
        StreamingDataset(server.url, str(tmp_path / "b"), 1 << 30, mode="full", features=FEATURES, shuffle_window=2,
                         stream_buffers=2)
    with pytest.raises(ValueError, match="is larger than max_bytes"):
        StreamingDataset(server.url, str(tmp_path / "c"), 1000, mode="cached", features=FEATURES)
    with pytest.raises(ValueError, match="no such object on the store"):
        StreamingDataset(server.url, str(tmp_path / "d"), 1 << 30, features=FEATURES, index="nope.txt")


@pytest.fixture
def own_server(www, tmp_path):
    """An nginx of the test's own (to stop and restart), rate-limited on /slow/."""
    n = Nginx(tmp_path / "nginx", www, slow_rate="100k").start()
    yield n
    n.stop()


# A fetch cut off midway and resumed, and a failed fetch read again in the
# next epoch, are tested without timers in the C++ tests (streaming_dataset_
# test.cc: a fault-injecting Store); the HTTP store's own retries across a
# server restart in test_store.py.


def test_server_gone_is_a_clear_error_not_a_hang(own_server, tmp_path):
    ds = StreamingDataset(own_server.url + "/slow", str(tmp_path / "c"), 1 << 30, mode="full", features=FEATURES,
                          attempts=2, backoff_s=0.05, prefetch=1, fetchers=1, shuffle_window=1)
    loader = stoker.DataLoader(ds, batch_size=50, num_workers=1)
    it = iter(loader)
    next(it)
    own_server.stop(sig=9)
    t0 = time.monotonic()
    with pytest.raises(Exception) as e:
        for _ in it:
            pass
    assert time.monotonic() - t0 < 60
    msg = str(e.value)
    assert "failed after 2 attempts" in msg and own_server.url in msg and "shard-" in msg, msg
    assert ds.stats()["fetch_errors"] >= 1


def corrupt_copy(www, tmp_path, name, how):
    bad = tmp_path / "bad-www"
    shutil.copytree(www, bad)
    path = bad / name
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x10
    else:  # shorter than the index says
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    return bad


def test_corrupt_shard_on_the_server_is_named(www, tmp_path):
    bad = corrupt_copy(www, tmp_path, "shard-004.tfrecord", "flip")
    n = Nginx(tmp_path / "nginx", bad).start()
    try:
        full = StreamingDataset(n.url, str(tmp_path / "c1"), 1 << 30, mode="full", features=FEATURES)
        with pytest.raises(Exception, match=r"shard shard-004.tfrecord from .*CRC-32C [0-9a-f]{8} does not match"):
            epoch_ys(stoker.DataLoader(full, batch_size=10, num_workers=2))
        assert not os.path.exists(tmp_path / "c1" / "shard-004.tfrecord")
        full.close()
        # The same through memory (a cache with room for one shard).
        mem = StreamingDataset(n.url, str(tmp_path / "c3"), shard_size(www), mode="full", features=FEATURES)
        with pytest.raises(Exception, match=r"shard shard-004.tfrecord from .*CRC-32C [0-9a-f]{8} does not match"):
            epoch_ys(stoker.DataLoader(mem, batch_size=10, num_workers=2))
        assert mem.stats()["streamed"] > 0
        mem.close()
        # Growing: the bad shard is left out (and reported), the rest trains.
        grow = StreamingDataset(n.url, str(tmp_path / "c2"), 1 << 30, mode="cached", features=FEATURES, min_shards=N_SHARDS - 1)
        assert "shard-004.tfrecord" not in grow.epoch_shards and len(grow.epoch_shards) == N_SHARDS - 1
        st = grow.stats()
        assert st["fetch_errors"] == 1 and "shard-004.tfrecord" in st["last_fetch_error"]
        assert sorted(epoch_ys(stoker.DataLoader(grow, batch_size=10))) == sorted(ids_of(grow.epoch_shards))
    finally:
        n.stop()


def test_truncated_responses(www, tmp_path):
    # A shard on the server shorter than the index says: a clear error naming it.
    bad = corrupt_copy(www, tmp_path, "shard-002.tfrecord", "short")
    n = Nginx(tmp_path / "nginx", bad, slow_rate="500k").start()
    try:
        full = StreamingDataset(n.url, str(tmp_path / "c1"), 1 << 30, mode="full", features=FEATURES)
        with pytest.raises(Exception, match=r"shard-002.tfrecord.* has \d+ bytes, the index says \d+"):
            epoch_ys(stoker.DataLoader(full, batch_size=10, num_workers=2))
        full.close()
        # A response cut short mid-body (the file truncated under nginx while
        # it sends it, then restored): the download resumes, the data is whole.
        name, first, count = "big.tfrecord", 100000, 1000
        path = os.path.join(bad, name)
        write_tfrecord(path, [{"x": np.full(WIDTH, i, np.float32), "y": np.int64(i)}
                              for i in range(first, first + count)])
        data = open(path, "rb").read()  # ~1.1 MB: about 2 s at /slow/'s 500 KB/s
        log = os.path.join(str(tmp_path / "nginx"), "error.log")
        for attempt in range(3):
            local = str(tmp_path / f"cut{attempt}")
            done = {}
            t = threading.Thread(target=lambda: done.setdefault("ds", StreamingDataset(
                n.url + "/slow", local, 1 << 30, mode="cached", features=FEATURES, shards=[(name, len(data), None, count)],
                backoff_s=0.5, fetchers=1)))
            t.start()
            time.sleep(0.6)
            with open(path, "r+b") as f:
                f.truncate(1000)
            time.sleep(0.2)
            with open(path, "r+b") as f:
                f.write(data)
            t.join(60)
            ds = done["ds"]
            assert open(os.path.join(local, name), "rb").read() == data
            assert sorted(epoch_ys(stoker.DataLoader(ds, batch_size=50))) == list(range(first, first + count))
            ds.close()
            text = open(log).read()
            if "read only" in text or "truncated" in text:
                break  # the cut happened (nginx says so) and was survived
        else:
            pytest.fail("nginx never noticed the truncation")
    finally:
        n.stop()


def test_restart_with_half_written_and_torn_files(server, www, tmp_path):
    local = tmp_path / "cache"
    local.mkdir()
    a, b = "shard-000.tfrecord", "shard-001.tfrecord"
    da, db = open(os.path.join(www, a), "rb").read(), open(os.path.join(www, b), "rb").read()
    (local / (a + ".part")).write_bytes(da[: len(da) // 2])  # a crash halfway
    (local / (b + ".part")).write_bytes(b"\0" * 5000)  # a torn write
    ds = StreamingDataset(server.url, str(local), 1 << 30, mode="full", features=FEATURES)
    assert sorted(epoch_ys(stoker.DataLoader(ds, batch_size=10, num_workers=2))) == list(range(N_SHARDS * PER_SHARD))
    total = sum(os.path.getsize(os.path.join(www, f)) for f in os.listdir(www) if f.endswith(".tfrecord"))
    # a: only its missing half; b: 5000 bytes resumed, CRC wrong, then from scratch.
    assert ds.stats()["bytes_downloaded"] == total - len(da) // 2 + (len(db) - 5000)
    assert (local / a).read_bytes() == da and (local / b).read_bytes() == db
    assert not [f for f in os.listdir(local) if f.endswith(".part")]
    # A restart reuses the cache: no downloads.
    ds.close()
    again = StreamingDataset(server.url, str(local), 1 << 30, mode="full", features=FEATURES)
    assert sorted(epoch_ys(stoker.DataLoader(again, batch_size=10))) == list(range(N_SHARDS * PER_SHARD))
    assert again.stats()["downloads"] == 0


def test_two_loaders_share_one_cache(server, tmp_path):
    script = textwrap.dedent(f"""
        import json, sys
        import stoker
        from stoker.cache import StreamingDataset
        ds = StreamingDataset({server.url + "/slow"!r}, {str(tmp_path / "shared")!r}, 1 << 30, mode="full",
                              features={FEATURES!r}, fetchers=2)
        ys = sorted(y for b in stoker.DataLoader(ds, batch_size=10, num_workers=2, shuffle=True)
                    for y in b["y"].tolist())
        st = ds.stats()
        print(json.dumps({{"ok": ys == list(range({N_SHARDS * PER_SHARD})), "downloads": st["downloads"],
                          "hits": st["hits"]}}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env) for _ in range(2)]
    import json
    outs = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
    assert all(o["ok"] for o in outs), outs
    assert sum(o["downloads"] for o in outs) == N_SHARDS, outs  # each shard downloaded once in all
    assert not [f for f in os.listdir(tmp_path / "shared") if f.endswith((".part", ".reserve"))]


def test_resume_mid_epoch_repeats_the_epochs_shards(server, www, tmp_path):
    local = str(tmp_path / "cache")
    ds = StreamingDataset(server.url + "/slow", local, 1 << 30, mode="cached", features=FEATURES, min_shards=3)
    loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=2, seed=7)
    loader.set_epoch(5)
    it = iter(loader)
    first = [next(it)["y"].tolist() for _ in range(4)]
    state = loader.state_dict()
    rest = [b["y"].tolist() for b in it]
    shards = ds.epoch_shards
    time.sleep(1.0)  # the cache grows meanwhile
    ds2 = StreamingDataset(server.url, local, 1 << 30, mode="cached", features=FEATURES)
    assert len(ds2.epoch_shards) > len(shards)
    loader2 = stoker.DataLoader(ds2, batch_size=10, shuffle=True, num_workers=1, seed=7)
    loader2.load_state_dict(state)
    assert [b["y"].tolist() for b in loader2] == rest
    assert ds2.epoch_shards == shards
    assert sorted(sum(first + rest, [])) == sorted(ids_of(shards))


def test_a_growing_epoch_resumed_on_3_then_2_then_1_ranks_reads_its_own_shards_once(server, www, tmp_path):
    """mode='cached' over HTTP: the epoch is the shards cached when it
    began; the state carries that list, so ranks of another topology read
    those shards (not the cache as it has grown), every sample once."""
    from test_elastic_resume import exactly_once, run_segments
    local = str(tmp_path / "cache")
    ds = StreamingDataset(server.url + "/slow", local, 1 << 30, mode="cached", features=FEATURES, min_shards=3)
    loader = stoker.DataLoader(ds, batch_size=10, num_workers=2,
                               sampler=ds.sampler(shuffle=True, seed=7, rank=0, world_size=1))
    it = iter(loader)
    counts = collections.Counter(y for _ in range(2) for y in next(it)["y"].tolist())
    state = loader.state_dict()
    del it
    shards = ds.epoch_shards
    time.sleep(1.0)  # the cache grows meanwhile
    ds2 = StreamingDataset(server.url, local, 1 << 30, mode="cached", features=FEATURES)
    assert len(ds2.epoch_shards) > len(shards)

    def make(world, rank, workers, batch):
        return stoker.DataLoader(ds2, batch_size=batch, num_workers=max(1, workers),
                                 sampler=ds2.sampler(shuffle=True, seed=7, rank=rank, world_size=world, pad=True))
    counts, _ = run_segments(make, [(3, 2, 4, 1), (2, 1, 6, 1), (1, 0, 5, None)], counts=counts,
                             ids=lambda b: b["y"], first_state=state)
    assert ds2.epoch_shards == shards
    assert sorted(counts) == sorted(ids_of(shards))
    exactly_once(counts, len(ids_of(shards)))


def test_tar_shards_and_in_process_reads(tmp_path):
    root = tmp_path / "tars"
    samples = [{"__key__": f"s{i:04d}", "x.npy": np.full((3, 4), i, np.int16), "cls": i} for i in range(60)]
    root.mkdir()
    write_tar_shards(str(root / "part-%03d.tar"), samples, maxcount=20)
    write_index(root)
    ds = StreamingDataset("file://" + str(root), str(tmp_path / "c"), 1 << 30, mode="full", shuffle_window=1)
    assert [f[0] for f in ds.fields] == ["x.npy", "cls"] and len(ds) == 60
    assert ds[7]["x.npy"].tolist() == np.full((3, 4), 7, np.int16).tolist() and int(ds[7]["cls"]) == 7
    got = [b for b in stoker.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)]
    assert sorted(int(c) for b in got for c in b["cls"]) == list(range(60))
    assert all((b["x.npy"][:, 0, 0] == b["cls"]).all() for b in got)


def test_workers_take_the_epochs_order_natively_in_the_same_order_as_python(tmp_path, monkeypatch):
    """The epoch protocol is one: with workers, the order goes from the
    dataset to the scheduler without Python per sample (the sampler is never
    iterated in Python), and it is the order a loader without workers reads."""
    root = tmp_path / "tars"
    root.mkdir()
    write_tar_shards(str(root / "part-%03d.tar"), [{"__key__": f"s{i:04d}", "cls": i} for i in range(90)], maxcount=10)
    write_index(root)
    ds = StreamingDataset("file://" + str(root), str(tmp_path / "c"), 1 << 30, mode="full", shuffle_window=2)

    def epochs(num_workers, **kw):
        loader = stoker.DataLoader(ds, shuffle=True, seed=5, num_workers=num_workers, **kw)
        out = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            out.append([[int(c) for c in np.atleast_1d(b["cls"])] for b in loader])
        return out

    in_python = epochs(0, batch_size=8, drop_last=True)
    none_python = epochs(0, batch_size=None)
    from stoker.cache import StreamingSampler

    def no_python_iteration(self):
        raise AssertionError("the sampler was iterated in Python")
        yield
    monkeypatch.setattr(StreamingSampler, "__iter__", no_python_iteration)
    assert epochs(2, batch_size=8, drop_last=True) == in_python
    assert epochs(2, batch_size=None) == none_python
    assert in_python[0] != in_python[1] and sorted(sum(none_python[0], [])) == list(range(90))
    assert all(len(b) == 8 for b in in_python[0]) and len(in_python[0]) == 90 // 8


def test_python_workers_over_a_growing_dataset_get_a_clear_error(server, tmp_path):
    # (A full one is read there: test_stream_workers.py.)
    ds = StreamingDataset(server.url, str(tmp_path / "c"), 1 << 30, mode="cached", features=FEATURES)
    loader = stoker.DataLoader(ds.map(lambda x: x * 2, field="x"), batch_size=10, num_workers=1)
    with pytest.raises(Exception, match="an epoch of mode='cached' .* mode='full'"):
        next(iter(loader))
    # In this process (num_workers=0) the Python transform runs fine.
    b = next(iter(stoker.DataLoader(ds.map(lambda x: x * 2, field="x"), batch_size=10)))
    assert (b["x"][:, 0] == 2 * b["y"]).all()


def test_index_command(tmp_path):
    root = make_shards(str(tmp_path / "s"), n=2)
    os.remove(os.path.join(root, "index.txt"))
    out = subprocess.run([sys.executable, "-m", "stoker.cli", "index", root], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    rows = parse_shard_index(open(os.path.join(root, "index.txt")).read(), "index.txt")
    assert [(r[0], r[3]) for r in rows] == [("shard-000.tfrecord", PER_SHARD), ("shard-001.tfrecord", PER_SHARD)]
    from crc32c_ref import crc32c
    assert rows[0][2] == crc32c(open(os.path.join(root, "shard-000.tfrecord"), "rb").read())


@pytest.mark.skipif(not os.path.exists(shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable),
                                                                                  "torchrun")),
                    reason="torchrun not installed")
def test_two_ranks_of_a_torchrun_job_read_the_same_growing_epochs(server, tmp_path):
    import json
    import socket
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1",
           "TMPDIR": str(tmp_path)}  # torchrun leaves a log directory in TMPDIR
    r = subprocess.run([torchrun, "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
                        os.path.join(os.path.dirname(__file__), "ddp_stream.py"), "--url", server.url + "/slow",
                        "--cache", str(tmp_path / "shared"), "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=300, start_new_session=True)
    assert r.returncode == 0, r.stderr[-4000:]
    logs = [json.load(open(tmp_path / f"rank{k}.json")) for k in (0, 1)]
    sizes = []
    for e0, e1 in zip(*logs):
        assert e0["shards"] == e1["shards"], "the ranks read different snapshots"
        want = sorted(ids_of(e0["shards"]))
        assert len(e0["ys"]) == len(e1["ys"]) == (len(want) + 1) // 2
        assert sorted(set(e0["ys"]) | set(e1["ys"])) == want  # together: the epoch, once (plus padding)
        assert len(set(e0["ys"]) & set(e1["ys"])) <= 1
        sizes.append(len(e0["shards"]))
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("fields", [None, {"x.npy": "npy", "cls": "int"}, {"r.bin": ("float32", (4,)), "cls": "int"}])
def test_tar_shards_with_declared_or_inferred_fields_from_a_directory_and_over_http(tmp_path, fields):
    from stoker.io import write_tar_shards
    src = tmp_path / "src"
    src.mkdir()
    write_tar_shards(str(src / "s-%03d.tar"), ({"x.npy": np.full(4, i, np.float32), "r.bin": np.full(4, i, np.float32),
                                                 "cls": i} for i in range(100)), maxcount=25)
    write_index(str(src))
    first = "r.bin" if fields and "r.bin" in fields else "x.npy"
    server = Nginx(tmp_path / "nginx", str(src)).start()
    try:
        for k, remote in enumerate([str(src), server.url]):
            ds = StreamingDataset(remote, str(tmp_path / f"cache{k}"), max_bytes=1 << 30, mode="cached", fields=fields, min_shards=4)
            ys = []
            for b in stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=2):
                assert (b[first][:, 0].long() == b["cls"]).all()
                ys.extend(b["cls"].tolist())
            assert sorted(ys) == list(range(100)), remote
            assert ds.stats()["fetch_errors"] == 0
            ds.close()
    finally:
        server.stop()


@pytest.mark.parametrize("fields,waits", [({"r.bin": ("float32", (4,)), "cls": "int"}, False),
                                          ({"x.npy": "npy", "cls": "int"}, True)], ids=["declared", "npy"])
def test_declared_tar_fields_open_without_waiting_for_a_shard(tmp_path, fields, waits):
    """Fields declared in full are known at once, so opening does not wait
    for the first shard, whose transfer over a slow link can take as long
    as the shard is large.  An .npy field takes its dtype and shape from
    the first sample, so there the open still waits for a shard.  nginx
    holds /slow/ to 4 KB/s: a shard of about 15 KB takes seconds."""
    from stoker.io import write_tar_shards
    src = tmp_path / "src"
    src.mkdir()
    write_tar_shards(str(src / "s-%03d.tar"), ({"x.npy": np.full(4, i, np.float32), "r.bin": np.full(4, i, np.float32),
                                                 "cls": i} for i in range(20)), maxcount=5)
    write_index(str(src))
    server = Nginx(tmp_path / "nginx", str(src), slow_rate="4k").start()
    try:
        ds = StreamingDataset(server.url + "/slow", str(tmp_path / "cache"), max_bytes=0, mode="full", fields=fields)
        assert (ds.stats()["downloads"] > 0) == waits
        assert len(ds) == 20
        ds.close()
    finally:
        server.stop()


def test_a_cached_shard_torn_by_a_power_cut_is_found_and_fetched_again(server, www, tmp_path):
    local = str(tmp_path / "cache")
    ds = StreamingDataset(server.url, local, max_bytes=1 << 30, mode="cached", features=FEATURES, min_shards=N_SHARDS)
    assert sorted(epoch_ys(stoker.DataLoader(ds, batch_size=50, num_workers=2))) == list(range(N_SHARDS * PER_SHARD))
    ds.close()
    victim = os.path.join(local, "shard-007.tfrecord")
    try:
        stamp = os.getxattr(victim, "user.stoker.shard").decode()
    except OSError:
        pytest.skip("this file system keeps no user extended attributes (shards are fsynced)")
    # What a power cut leaves of a shard written without fsync: the name,
    # the size and the stamp of the boot that wrote it, zeros for a page.
    os.setxattr(victim, "user.stoker.shard", (stamp[:8] + " 00000000-0000-4000-8000-000000000000").encode())
    with open(victim, "r+b") as f:
        f.seek(4096)
        f.write(b"\0" * 4096)
    ds = StreamingDataset(server.url, local, max_bytes=1 << 30, mode="cached", features=FEATURES, min_shards=N_SHARDS)
    assert sorted(epoch_ys(stoker.DataLoader(ds, batch_size=50, num_workers=2))) == list(range(N_SHARDS * PER_SHARD))
    st = ds.stats()
    assert st["torn_shards"] == 1 and st["verified_shards"] == 1 and st["downloads"] == 1, st
    ds.close()
