"""Why did a worker die?  The kernel's OOM killer leaves counters behind:
`oom_kill` in the worker's memory cgroup (v2 memory.events, v1
memory.oom_control) and in /proc/vmstat (system-wide).  Comparing them with
their values when the loader started tells an OOM kill from a kill by hand."""
from __future__ import annotations

import os
import signal

from stoker.errors import LoaderTimeout, WorkerCrashed, describe_exit, short_repr


def _read_counter(path: str, key: str):
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    return int(parts[1])
    except (OSError, ValueError):
        pass
    return None


def system_oom_kills():
    return _read_counter("/proc/vmstat", "oom_kill")


def cgroup_oom_file(pid: int):
    """The file counting OOM kills in `pid`'s memory cgroup, or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = f"/sys/fs/cgroup/memory{path}/memory.oom_control"
            if os.path.exists(candidate):
                return candidate
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                candidate = f"{root}{path}/memory.events"
                if os.path.exists(candidate):
                    return candidate
    return None


class OomWatch:
    """Counters taken when a worker starts, to compare when it dies."""

    def __init__(self, pid: int):
        self.system = system_oom_kills()
        self.cgroup_file = cgroup_oom_file(pid)
        self.cgroup = _read_counter(self.cgroup_file, "oom_kill") if self.cgroup_file else None

    def verdict(self, pid: int, sig: int):
        """(oom: bool, hint: str) for a worker that died of `sig`."""
        if sig != signal.SIGKILL:
            return False, ""
        files = {self.cgroup_file: self.cgroup}
        now_file = cgroup_oom_file(pid)  # the zombie's cgroup, if it moved
        if now_file and now_file not in files:
            files[now_file] = 0
        for path, before in files.items():
            if not path:
                continue
            after = _read_counter(path, "oom_kill")
            if after is not None and before is not None and after > before:
                return True, (f"the kernel's OOM killer killed it (oom_kill in {path} went from {before} "
                              f"to {after}): lower batch_size, num_workers or prefetch_factor, or give the "
                              f"job more memory")
        now = system_oom_kills()
        if now is not None and self.system is not None and now > self.system:
            return True, (f"the kernel's OOM killer ran {now - self.system} time(s) since the worker started "
                          f"(/proc/vmstat oom_kill): probably out of memory; check `dmesg -T`")
        avail = _read_counter("/proc/meminfo", "MemAvailable:")
        mem = f" (MemAvailable now {avail // 1024} MiB)" if avail is not None else ""
        return False, (f"no OOM kill was recorded{mem}: it was killed by someone else (kill -9, a job "
                       f"scheduler, a watchdog)")


def crash_error(held, wid: int, pid: int, code, sig, watch) -> WorkerCrashed:
    """What a worker's death says: how it ended, the batches it held
    ([(batch id, indices)]) and, from `watch` (its OomWatch), whether the
    OOM killer did it."""
    msg = f"DataLoader worker {wid} (pid {pid}) exited unexpectedly: {describe_exit(sig, code)}"
    if held:
        msg += "; it held " + ", ".join(f"batch {b} (indices {short_repr(i, 120)})" for b, i in held)
    oom, hint = watch.verdict(pid, sig) if watch is not None else (False, "")
    if hint:
        msg += ". " + hint
    return WorkerCrashed(msg, worker_id=wid, pid=pid, signal=sig or None,
                         exit_code=None if sig else code, indices=[i for _b, i in held], oom=oom)


def timeout_error(held_by: dict, workers: list, timeout: float) -> LoaderTimeout:
    """A timeout, with what each worker holds ({worker id: [(batch id, indices)]})."""
    parts = []
    for wid, tasks in sorted(held_by.items()):
        batches = ", ".join(f"batch {b} (indices {short_repr(i, 120)})" for b, i in tasks)
        proc = workers[wid] if wid < len(workers) else None
        who = f"pid {proc.pid}" if proc is not None else "a native thread"
        parts.append(f"worker {wid} ({who}) holds {batches}")
    return LoaderTimeout(f"DataLoader timed out after {timeout} seconds" + ("; " + "; ".join(parts) if parts else ""))
