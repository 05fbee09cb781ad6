"""stoker.trace(): a Chrome trace-event file of the pipeline, which Perfetto
(https://ui.perfetto.dev) opens.  docs/trace.md describes what is in it.

    with stoker.trace("run.json"):
        for batch in loader: ...

or STOKER_TRACE=run.json in the environment (the file is written when the
process exits).  The trace points are in the C++ core (core/trace.h): the
training loop's waits, each worker's read, collate and publish, reader and
fetcher threads, a flow from each batch's production to the next() that
received it, and counters at 20 Hz.  Under torchrun (WORLD_SIZE > 1) each rank
writes `run.rank<R>.json`; `python -m stoker trace-merge run.rank*.json -o
run.json` aligns them into one timeline."""
from __future__ import annotations

import atexit
import json
import os
from typing import Iterable, Optional

ENV = "STOKER_TRACE"
_OWNER_ENV = "STOKER_TRACE_PID"  # the process whose STOKER_TRACE it is (not a spawned worker's)


def rank_path(path: str) -> str:
    """`path` for this rank: run.json -> run.rank3.json when WORLD_SIZE > 1."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return path
    if world <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext or '.json'}"


class trace:
    """Records a trace while the `with` block runs (or from start() to
    stop()).  `path` gets a `.rank<R>` suffix when WORLD_SIZE > 1."""

    def __init__(self, path: str, process_name: Optional[str] = None):
        self.path = rank_path(os.fspath(path))
        self.process_name = process_name or _default_name()
        self.written: Optional[str] = None

    def start(self) -> "trace":
        from stoker import _stoker as lib
        lib.trace_start(self.path, self.process_name)
        lib.trace_name_thread("training loop")  # (this thread's track: next()'s waits)
        return self

    def stop(self) -> str:
        from stoker import _stoker as lib
        self.written = lib.trace_stop()
        return self.written

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _default_name() -> str:
    rank = os.environ.get("RANK")
    return f"training loop (rank {rank})" if rank is not None and os.environ.get("WORLD_SIZE", "1") != "1" \
        else "training loop"


def start_from_env(lib) -> None:
    """STOKER_TRACE=path: record from the first use of the native engine to
    the process's exit.  Called when stoker._native loads."""
    path = os.environ.get(ENV)
    if not path:
        return
    owner = os.environ.get(_OWNER_ENV)
    if owner is not None and owner != str(os.getpid()):
        return  # a worker started by spawn or forkserver: its parent records
    os.environ[_OWNER_ENV] = str(os.getpid())
    t = trace(path)
    try:
        lib.trace_start(t.path, t.process_name)
        lib.trace_name_thread("training loop")
    except Exception as e:  # a bad path must not stop training
        import warnings
        warnings.warn(f"stoker: STOKER_TRACE={path!r}: {e}", RuntimeWarning, stacklevel=2)
        return

    def _write():
        if lib.trace_recording():
            lib.trace_stop()
    atexit.register(_write)


def merge(paths: Iterable[str], out: str) -> str:
    """One timeline of several ranks' traces: each file's times are moved by
    the difference of its realtime anchor from the earliest (the machines'
    clocks are assumed in step, as NTP keeps them to about a millisecond), and
    its process ids are made distinct by the rank's order."""
    docs = []
    for p in paths:
        with open(p) as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{p} is not a trace stoker wrote (invalid JSON: {e})") from None
        other = doc.get("otherData", {}) if isinstance(doc, dict) else {}
        if "anchor_realtime_ns" not in other:
            raise ValueError(f"{p} has no otherData.anchor_realtime_ns: not a trace stoker wrote")
        docs.append((p, doc, int(other["anchor_realtime_ns"])))
    if not docs:
        raise ValueError("no traces to merge")
    base = min(a for _p, _d, a in docs)
    events = []
    for i, (p, doc, anchor) in enumerate(docs):
        shift = (anchor - base) / 1000.0
        label = os.path.basename(p)
        for e in doc["traceEvents"]:
            e = dict(e)
            if "pid" in e:
                e["pid"] = (i + 1) * 10_000_000 + int(e["pid"])  # (pids of different machines may collide)
            if "ts" in e:
                e["ts"] = float(e["ts"]) + shift
            if e.get("ph") == "M" and e.get("name") == "process_name":
                e["args"] = {"name": f"{label}: {e['args']['name']}"}
            if "id" in e:
                e["id"] = f"{i}:{e['id']}"
            events.append(e)
    merged = {"traceEvents": events, "displayTimeUnit": "ms",
              "otherData": {"producer": "stoker trace-merge", "anchor_realtime_ns": base,
                            "sources": [p for p, _d, _a in docs]}}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(merged, f)
    os.replace(tmp, out)
    return out
