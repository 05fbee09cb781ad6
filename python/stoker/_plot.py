"""Pictures: `python -m stoker plot run.json -o run.png` (a trace of
stoker.trace) and `stoker bench --plot out.png` (the bench's table).

matplotlib is an optional extra (pip install "stoker[plot]"); nothing else in
stoker imports it."""
from __future__ import annotations

import collections
import json
import os

BIN_S = 0.1  # the time series' resolution
_WORK = {"read", "fetch", "decode", "transform", "collate", "publish", "h2d"}
_SLOT_STATES = ("held", "ready", "filling", "queued", "free")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("drawing needs matplotlib: pip install matplotlib (or stoker[plot])") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def load_trace(path: str) -> list:
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not a trace (invalid JSON: {e})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ValueError(f"{path} has no traceEvents list: not a Chrome trace")
    return events


def _coverage(slices, t_end: float) -> list:
    """Fraction of each BIN_S bin covered by (start, end) seconds."""
    n = max(1, int(t_end / BIN_S) + 1)
    out = [0.0] * n
    for a, b in slices:
        i = int(a / BIN_S)
        while a < b and i < n:
            edge = (i + 1) * BIN_S
            out[i] += min(b, edge) - a
            a = edge
            i += 1
    return [min(1.0, v / BIN_S) for v in out]


def series(events: list) -> dict:
    """What plot_trace draws, as numbers: per track the work and wait
    coverage per bin, the slot pool's bytes by state over time, and the
    autotune decisions."""
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    slices = [e for e in events if e.get("ph") == "X"]
    t_end = max([(e["ts"] + e.get("dur", 0)) / 1e6 for e in slices] + [e["ts"] / 1e6 for e in events if "ts" in e]
                + [0.0])
    loop_wait, work = [], collections.defaultdict(list)
    for e in slices:
        span = (e["ts"] / 1e6, (e["ts"] + e.get("dur", 0)) / 1e6)
        track = threads.get((e["pid"], e["tid"])) or procs.get(e["pid"]) or f"pid {e['pid']}"
        if e["name"] == "wait" and e.get("args", {}).get("for") == "batch":
            loop_wait.append(span)
        elif e["name"] in _WORK:
            work[track].append(span)
    memory = [(e["ts"] / 1e6, e["args"]) for e in events if e.get("ph") == "C" and e.get("name") == "slot pool bytes"]
    decisions = [(e["ts"] / 1e6, e.get("args", {})) for e in events
                 if e.get("ph") == "i" and e.get("name") == "autotune"]
    return {"t_end": t_end, "loop_stall": _coverage(loop_wait, t_end),
            "busy": {k: _coverage(v, t_end) for k, v in sorted(work.items())},
            "memory": memory, "decisions": decisions}


def plot_trace(path: str, out: str) -> str:
    s = series(load_trace(path))
    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    xs = [i * BIN_S for i in range(len(s["loop_stall"]))]
    ax = axes[0]
    ax.fill_between(xs, s["loop_stall"], step="post", alpha=0.5, color="tab:red")
    ax.set_ylabel("loop waiting\n(fraction)")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{os.path.basename(path)}: the training loop's stall, each worker's busy time, memory")
    ax = axes[1]
    for name, cov in s["busy"].items():
        ax.step([i * BIN_S for i in range(len(cov))], cov, where="post", label=name)
    ax.set_ylabel("busy (fraction)")
    ax.set_ylim(0, 1.05)
    if s["busy"]:
        ax.legend(loc="upper right", fontsize="small", ncol=4)
    ax = axes[2]
    if s["memory"]:
        ts = [t for t, _a in s["memory"]]
        stacks = [[a.get(k, 0) / 2**20 for _t, a in s["memory"]] for k in _SLOT_STATES]
        ax.stackplot(ts, stacks, labels=_SLOT_STATES, step="post", alpha=0.7)
        ax.legend(loc="upper right", fontsize="small", ncol=5)
    ax.set_ylabel("slot pool (MiB)")
    ax.set_xlabel("seconds")
    for t, args in s["decisions"]:
        for a in axes:
            a.axvline(t, color="k", linestyle=":", linewidth=0.8)
        axes[0].annotate(f"{args.get('knob', '')} {args.get('old', '')}\u2192{args.get('new', '')}", (t, 1.0),
                         fontsize="x-small", rotation=90, va="top")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_bench(result: dict, out: str) -> str:
    """The bench's table as bars: samples/s of each loader per workload, the
    ratio over stoker's bar."""
    plt = _pyplot()
    rows = result["rows"]
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    loaders = list(dict.fromkeys(r["loader"] for r in rows))
    rate = {(r["workload"], r["loader"]): r["samples_per_s"] for r in rows}
    fig, ax = plt.subplots(figsize=(2.2 * len(workloads) + 3, 4.5))
    width = 0.8 / max(1, len(loaders))
    for j, name in enumerate(loaders):
        xs = [i + j * width for i in range(len(workloads))]
        ax.bar(xs, [rate.get((w, name), 0) for w in workloads], width, label=name)
    for i, w in enumerate(workloads):
        if rate.get((w, "torch")) and rate.get((w, "stoker")):
            top = rate[(w, "stoker")]
            ax.annotate(f"{top / rate[(w, 'torch')]:.1f}x", (i + width * (len(loaders) - 1), top),
                        ha="center", va="bottom", fontsize="small")
    ax.set_xticks([i + width * (len(loaders) - 1) / 2 for i in range(len(workloads))], workloads)
    ax.set_ylabel("samples/s")
    ax.set_yscale("log")
    ax.set_title(f"stoker bench ({result.get('cpus', '?')} CPUs, torch {result.get('torch_version', '?')})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
