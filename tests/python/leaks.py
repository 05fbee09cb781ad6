"""What a loader must not leave behind: processes, arena fds, /dev/shm or /tmp
entries, shared memory; and what no test may leave behind (Resources: the
conftest checks every test)."""
import gc
import os
import threading
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


def _fds():
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass  # (the fd of the listing itself, closed by now)
    return out


def _native_threads():
    """This process's threads named stoker-* (the engine's and the readers')."""
    out = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith("stoker-"):
                    out.add(int(tid))
        except OSError:
            pass
    return out


def _process_wide():
    """What lives as long as the process by design, started by whichever
    test needs it first: multiprocessing's resource tracker and forkserver
    (their pipes; the processes are not counted as children), stoker's
    reaper thread (one per process, python/stoker/_reaper.py), tqdm's
    monitor thread (one per process while any bar has lived)."""
    fds = set()
    try:
        from multiprocessing import forkserver, resource_tracker
        fds.add(getattr(resource_tracker._resource_tracker, "_fd", None))
        fds.add(getattr(forkserver._forkserver, "_forkserver_alive_fd", None))
    except (ImportError, AttributeError):
        pass
    return fds - {None}, {"stoker-reaper", "tqdm_monitor"}


class Resources:
    """Open fds (by number and target; memfds among them), Python threads,
    stoker's native threads and child processes, at one moment."""

    def __init__(self, fds, threads, native, kids):
        self.fds, self.threads, self.native, self.kids = fds, threads, native, kids

    @classmethod
    def now(cls):
        return cls(_fds(), {t.ident: t.name for t in threading.enumerate()}, _native_threads(), set(children()))

    def leaked_since(self, within_s=5.0):
        """What exists now and did not before ("" when nothing), waiting up
        to within_s for it to go (a collection, an exit, a join)."""
        deadline = time.monotonic() + within_s
        while True:
            gc.collect()
            now = Resources.now()
            keep_fds, keep_threads = _process_wide()
            fds = {fd: t for fd, t in now.fds.items() if self.fds.get(fd) != t and fd not in keep_fds}
            threads = {i: n for i, n in now.threads.items() if i not in self.threads and n not in keep_threads}
            native = now.native - self.native
            kids = now.kids - self.kids
            if not (fds or threads or native or kids):
                return ""
            if time.monotonic() > deadline:
                parts = []
                memfds = {fd: t for fd, t in fds.items() if t.startswith("/memfd:")}
                if memfds:
                    parts.append(f"memfds {memfds}")
                other = {fd: t for fd, t in fds.items() if fd not in memfds}
                if other:
                    parts.append(f"fds {other}")
                if threads:
                    parts.append(f"threads {sorted(threads.values())}")
                if native:
                    parts.append(f"native threads {sorted(native)}")
                if kids:
                    parts.append(f"child processes {sorted(kids)}")
                return "; ".join(parts)
            time.sleep(0.02)
