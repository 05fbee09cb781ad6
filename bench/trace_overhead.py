"""What the trace costs: `stoker bench`'s workloads with the trace off and on,
rounds alternating, torch's DataLoader measured in the same run.

    python bench/trace_overhead.py [--workloads abc] [--seconds 3] [--rounds 3]

With PYTHONPATH pointing at a build from before the trace points existed
(the previous commit), the same command measures that build ("on" is then
left out): the two runs' "off" columns, each as a ratio to its own torch
column, give the cost of the trace points compiled in and off."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import stoker
from stoker.bench import WORKLOADS, run_one


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="abc")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    has_trace = hasattr(stoker, "trace") and _has_trace()
    kinds = ["torch", "off"] + (["on"] if has_trace else [])
    rates = {(k, kind): [] for k in args.workloads for kind in kinds}
    sizes = {}
    for _ in range(args.rounds):
        for k in args.workloads:
            w = WORKLOADS[k]
            for kind in kinds:
                if kind == "on":
                    with tempfile.TemporaryDirectory() as d:
                        path = os.path.join(d, "run.json")
                        with stoker.trace(path):
                            r = run_one("stoker", w, args.seconds)
                        sizes[k] = os.path.getsize(path)
                else:
                    r = run_one("torch" if kind == "torch" else "stoker", w, args.seconds)
                rates[(k, kind)].append(r["samples_per_s"])
    rows = []
    for k in args.workloads:
        med = {kind: statistics.median(rates[(k, kind)]) for kind in kinds}
        row = {"workload": k, "title": WORKLOADS[k].title, **{f"{kind}_samples_per_s": med[kind] for kind in kinds},
               "off_vs_torch": med["off"] / med["torch"]}
        if has_trace:
            row["on_vs_off"] = med["on"] / med["off"]
            row["trace_mb"] = sizes[k] / 1e6
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"trace points: {'compiled in' if has_trace else 'absent (a build from before them)'}; "
          f"medians of {args.rounds} rounds of {args.seconds:.0f} s")
    for r in rows:
        line = (f"{r['workload']}: {r['title']:<48} torch {r['torch_samples_per_s']:>10.0f}/s  "
                f"stoker off {r['off_samples_per_s']:>10.0f}/s ({r['off_vs_torch']:.2f}x torch)")
        if has_trace:
            line += f"  on {r['on_samples_per_s']:>10.0f}/s ({r['on_vs_off']:.3f}x off, {r['trace_mb']:.0f} MB)"
        print(line)


def _has_trace() -> bool:
    try:
        from stoker import _stoker
    except ImportError:
        return False
    return hasattr(_stoker, "trace_start")


if __name__ == "__main__":
    sys.exit(main())
