"""A cache directory on a disk smaller than max_bytes.

The cache directory is a small tmpfs mounted in a private mount namespace
(so the test needs root); max_bytes is 1 GiB.  The cache must treat the full
disk as it treats max_bytes: evict what is not in use and keep turning over
(growing mode), stream what does not fit through memory (full mode), say
why when nothing can be evicted, and resume a download a full disk cut
short once there is room.  Without that, downloads fail with ENOSPC, their
partial files fill the disk, and the cache stops growing for good.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import numpy as np

from nginx import Nginx
from stoker.cache import write_index
from stoker.io import write_tfrecord
from test_streaming import N_SHARDS, PER_SHARD, WIDTH, shard_size, www  # noqa: F401 (www: a fixture)

TESTS = os.path.dirname(os.path.abspath(__file__))
DISK_KB = 400  # about seven of the 20 shards (52 KiB each)
BIG = 6000  # records of the big shard (1 KiB each)


def private_mount_available():
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not private_mount_available(),
                                reason="needs root to mount a small tmpfs in a private mount namespace")

PRELUDE = textwrap.dedent("""
    import json, os, sys, threading, time
    sys.path.insert(0, {tests!r})
    import stoker
    from stoker.cache import StreamingDataset
    from test_streaming import FEATURES, N_SHARDS, PER_SHARD, epoch_ys, ids_of
    url, local = sys.argv[1], sys.argv[2]

    disk = os.path.dirname(local)  # the tmpfs: other programs' files go here

    def avail():
        s = os.statvfs(disk)
        return s.f_bavail * s.f_frsize

    class DiskMonitor(threading.Thread):
        # The least free space seen on the cache's disk, polled every millisecond or so.
        def __init__(self):
            super().__init__(daemon=True)
            self.least, self.done = avail(), False
        def run(self):
            while not self.done:
                self.least = min(self.least, avail())
                time.sleep(0.001)
        def stop(self):
            self.done = True
            self.join()
            return self.least
""").format(tests=TESTS)


def run_on_small_disk(server_url, tmp_path, body, kb=DISK_KB, timeout=240):
    """Runs PRELUDE + body with `local` a directory (not made yet) on a fresh
    tmpfs of `kb` KiB; returns the JSON object the script prints last."""
    disk = str(tmp_path / "disk")
    os.makedirs(disk)
    script = PRELUDE + textwrap.dedent(body)
    cmd = (f"mount -t tmpfs -o size={kb}k tmpfs {disk} && exec {sys.executable} -c \"$STOKER_SCRIPT\" {server_url} "
           f"{disk}/cache")
    env = {**os.environ, "STOKER_SCRIPT": script, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def server(www, tmp_path_factory):  # (www: test_streaming's fixture)
    n = Nginx(tmp_path_factory.mktemp("nginx"), www, slow_rate="2m").start()
    yield n
    n.stop()


def test_growing_mode_turns_over_within_a_disk_smaller_than_max_bytes(server, www, tmp_path):
    out = run_on_small_disk(server.url, tmp_path, """
        mon = DiskMonitor(); mon.start()
        ds = StreamingDataset(url, local, max_bytes=1 << 30, mode="cached", features=FEATURES, fetchers=2, eviction="oldest")
        loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=2)
        epochs, most = 0, 0
        deadline = time.monotonic() + 150
        while ds.stats()["fraction_seen"] < 1.0 and time.monotonic() < deadline:
            ys = epoch_ys(loader)
            assert sorted(ys) == sorted(ids_of(ds.epoch_shards)), "an epoch lost or repeated samples"
            most = max(most, len(ds.epoch_shards))
            epochs += 1
            loader.set_epoch(epochs)
            time.sleep(0.05)
        st = ds.stats()
        ds.close()
        print(json.dumps({"stats": st, "epochs": epochs, "most": most, "least_free": mon.stop(),
                          "size": os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize}))
    """)
    st = out["stats"]
    # The whole remote dataset went through the small disk...
    assert st["fraction_seen"] == 1.0, out
    assert st["evictions"] > 0 and st["fetch_errors"] == 0, out
    # ...a disk's worth at a time, and the disk never ran full: the cache
    # keeps 5% of it free.
    size = shard_size(www)
    assert 2 <= out["most"] <= DISK_KB * 1024 // size, out
    assert out["least_free"] >= out["size"] // 20 - 8192, out


def test_full_mode_streams_what_the_disk_cannot_hold(server, www, tmp_path):
    out = run_on_small_disk(server.url, tmp_path, """
        mon = DiskMonitor(); mon.start()
        ds = StreamingDataset(url, local, max_bytes=1 << 30, mode="full", features=FEATURES, fetchers=2)
        loader = stoker.DataLoader(ds, batch_size=10, shuffle=True, num_workers=2)
        for e in range(3):
            loader.set_epoch(e)
            assert sorted(epoch_ys(loader)) == list(range(N_SHARDS * PER_SHARD)), "epoch %d" % e
        st = ds.stats()
        ds.close()
        print(json.dumps({"stats": st, "least_free": mon.stop(),
                          "size": os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize}))
    """)
    st = out["stats"]
    assert st["fetch_errors"] == 0, out
    assert 0 < st["cached_shards"] < N_SHARDS and st["streamed"] > 0, out
    assert out["least_free"] >= out["size"] // 20 - 8192, out


def test_a_disk_full_of_other_files_is_named_and_the_cache_recovers(server, www, tmp_path):
    out = run_on_small_disk(server.url, tmp_path, """
        filler = os.path.join(disk, "other-program.bin")  # beside the cache, not the cache's
        with open(filler, "wb") as f:  # all but 16 KiB: less than a shard
            f.write(b"x" * (avail() - 16384))
        try:
            StreamingDataset(url, local, max_bytes=1 << 30, mode="cached", features=FEATURES, fetchers=1, wait_timeout=2)
            message = None
        except TimeoutError as e:
            message = str(e)
        os.remove(filler)
        ds = StreamingDataset(url, local, max_bytes=1 << 30, mode="cached", features=FEATURES, fetchers=1, min_shards=2)
        ys = epoch_ys(stoker.DataLoader(ds, batch_size=10, num_workers=2))
        assert ys and sorted(ys) == sorted(ids_of(ds.epoch_shards))
        st = ds.stats()
        ds.close()
        print(json.dumps({"message": message, "stats": st}))
    """)
    m = out["message"]
    assert m and "0 of the 1 shards an epoch waits for" in m and "its file system has room for" in m, out
    assert "max_bytes=1073741824 is more than that disk holds now: free space there or lower max_bytes" in m, out
    st = out["stats"]
    assert st["cached_shards"] >= 2 and st["fetch_errors"] == 0, st


def test_a_download_the_disk_filled_under_is_resumed(server, www, tmp_path):
    # One shard of 6 MiB (more than the 4 MiB the download buffers before
    # writing) over the rate-limited /slow/ (2 MB/s), onto a disk of 8 MiB;
    # once part of it is written another program fills the disk.
    big = os.path.join(www, "big")
    if not os.path.exists(os.path.join(big, "index.txt")):
        os.makedirs(big, exist_ok=True)
        write_tfrecord(os.path.join(big, "big.tfrecord"),
                       [{"x": np.full(WIDTH, i, np.float32), "y": np.int64(i)} for i in range(BIG)])
        write_index(big)
    out = run_on_small_disk(server.url + "/slow/big", tmp_path, """
        part = os.path.join(local, "big.tfrecord.part")
        filler = os.path.join(disk, "other-program.bin")
        seen = {}

        def other_program():
            # Waits for the first 4 MiB of the download on disk, fills the
            # disk, waits until the download stopped writing, frees the disk.
            deadline = time.monotonic() + 60
            while not (os.path.exists(part) and os.path.getsize(part) > 0) and time.monotonic() < deadline:
                time.sleep(0.001)
            seen["have"] = os.path.getsize(part)
            with open(filler, "wb") as f:
                try:
                    f.write(b"x" * avail())
                    f.flush()
                except OSError:
                    pass
            size, still = -1, 0
            while still < 10 and time.monotonic() < deadline:  # a second without growth
                now = os.path.getsize(part)
                still, size = (still + 1, size) if now == size else (0, now)
                time.sleep(0.1)
            seen["kept"] = size
            os.remove(filler)

        t = threading.Thread(target=other_program)
        t.start()
        # The first epoch waits for a shard: here, through the full disk.
        ds = StreamingDataset(url, local, max_bytes=1 << 30, mode="cached", features=FEATURES, fetchers=1, wait_timeout=90)
        t.join()
        ys = epoch_ys(stoker.DataLoader(ds, batch_size=100, num_workers=2))
        st = ds.stats()
        ds.close()
        print(json.dumps({**seen, "ys": sorted(ys) == list(range(%d)), "stats": st}))
    """ % BIG, kb=8 << 10)
    st = out["stats"]
    # The full disk stopped the download: the cache said so and did not count
    # it as a failed download...
    assert "No space left on device" in st["last_fetch_error"] or "has room for" in st["last_fetch_error"], st
    assert st["fetch_errors"] == 0, st
    # ...kept what it had written (the part never shrank), went on from there
    # once there was room (less than a part's worth downloaded twice), checked
    # the shard against the index's CRC-32C, and every sample came.
    assert out["kept"] >= out["have"] > 0, out
    assert st["downloads"] == 1 and st["cached_shards"] == 1, st
    # (Resumed: the shard once, plus what arrived and found no room on the
    # disk.  From scratch it would be the shard twice.)
    assert st["bytes_downloaded"] < 2 * st["remote_bytes"] - out["kept"] // 2, (st, out)
    assert out["ys"], out
