"""The process table as /proc shows it: a process's children and descendants,
whether a pid still runs, PSS, CPU time, and the arena fds a process holds.  Used by
`stoker bench`, the stress and latency benchmarks, and the tests' leak checks."""
from __future__ import annotations

import os


def _mp_helper(pid: int) -> bool:
    """multiprocessing's own long-lived helpers (resource tracker, forkserver)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return b"resource_tracker" in cmd or b"forkserver" in cmd


def children(pid: int | None = None, include_mp_helpers: bool = False) -> list:
    """Direct children of `pid` (default: this process)."""
    pid = pid or os.getpid()
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out if include_mp_helpers else [p for p in out if not _mp_helper(p)]


def tree_pids(root: int | None = None) -> list:
    """`root` and all its descendants."""
    pids, todo = [], [root or os.getpid()]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += children(p, include_mp_helpers=True)
    return pids


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds `pid` has used so far; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def runnable_seconds(pids) -> float:
    """Seconds the threads of `pids` have run or waited for a core
    (/proc/<pid>/task/<tid>/schedstat); over a window, divided by its length:
    the threads runnable on average."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    run, wait, _ = f.read().split()
                total += int(run) + int(wait)
            except (OSError, ValueError):
                continue
    return total / 1e9


def arena_fds() -> list:
    """This process's open fds that refer to a stoker arena."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "stoker" in os.readlink(f"/proc/self/fd/{fd}"):
                fds.append(fd)
        except OSError:
            pass
    return fds


def stoker_files() -> list:
    """Entries in /dev/shm and /tmp that a loader could have left (stoker's, or
    torch's file_system sharing strategy)."""
    names = []
    for d in ("/dev/shm", "/tmp"):
        try:
            names += [f"{d}/{n}" for n in os.listdir(d) if "stoker" in n.lower() or n.startswith("torch_")]
        except OSError:
            pass
    return names
