"""What a loader must not leave behind: processes, arena fds, /dev/shm or /tmp
entries, shared memory."""
import gc
import os
import time

from stoker._procfs import alive, arena_fds, children, stoker_files  # noqa: F401 (used by tests)


def shmem_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


class Baseline:
    def __init__(self):
        gc.collect()
        self.children = set(children())
        self.files = set(stoker_files())
        self.shmem = shmem_kib()

    def assert_clean(self, within_s=2.0, shmem_slack_kib=32 * 1024):
        deadline = time.monotonic() + within_s
        while True:
            gc.collect()
            extra = set(children()) - self.children
            fds = arena_fds()
            files = set(stoker_files()) - self.files
            shmem = shmem_kib() - self.shmem
            if not extra and not fds and not files and shmem <= shmem_slack_kib:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"leaked: processes {sorted(extra)}, arena fds {fds}, files {sorted(files)}, "
                                     f"Shmem +{shmem} KiB")
            time.sleep(0.01)


def wait_gone(pids, timeout=5.0):
    """Seconds until every pid is gone; raises if some outlive `timeout`."""
    t0 = time.monotonic()
    while any(alive(p) for p in pids):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"still alive after {timeout} s: {[p for p in pids if alive(p)]}")
        time.sleep(0.002)
    return time.monotonic() - t0
