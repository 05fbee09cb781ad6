"""What a loader must not leave behind: processes, arena fds, /dev/shm or /tmp
entries, shared memory."""
import gc
import os
import time


def _mp_helper(pid):
    """multiprocessing's own long-lived helpers (resource tracker, forkserver)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return b"resource_tracker" in cmd or b"forkserver" in cmd


def children(pid=None):
    pid = pid or os.getpid()
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return [p for p in out if not _mp_helper(p)]


def arena_fds():
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "stoker" in os.readlink(f"/proc/self/fd/{fd}"):
                fds.append(fd)
        except OSError:
            pass
    return fds


def shmem_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


def stoker_files():
    names = []
    for d in ("/dev/shm", "/tmp"):
        try:
            names += [f"{d}/{n}" for n in os.listdir(d) if "stoker" in n.lower() or n.startswith("torch_")]
        except OSError:
            pass
    return names


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


def alive(pid):
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout=5.0):
    """Seconds until every pid is gone; raises if some outlive `timeout`."""
    t0 = time.monotonic()
    while any(alive(p) for p in pids):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"still alive after {timeout} s: {[p for p in pids if alive(p)]}")
        time.sleep(0.002)
    return time.monotonic() - t0
