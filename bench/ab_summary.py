"""Medians of bench/ab_builds.sh's runs: stoker's samples/s and its ratio to
torch per workload, for the base build and the new one.
    python bench/ab_summary.py OUT_DIR"""
import glob
import json
import os
import statistics
import sys


def main(out):
    first = json.load(open(sorted(glob.glob(os.path.join(out, "base_*.json")))[0]))
    for w in sorted({r["workload"] for r in first["rows"]}):
        line = [f"({w})"]
        for side in ("base", "new"):
            runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"{side}_*.json")))]
            rows = [{r["loader"]: r["samples_per_s"] for r in d["rows"] if r["workload"] == w} for d in runs]
            s = statistics.median(r["stoker"] for r in rows)
            ratio = statistics.median(r["stoker"] / r["torch"] for r in rows)
            line.append(f"{side}: stoker {s:,.0f} samples/s ({ratio:.1f}x torch)")
        per_round = []
        for b, n in zip(sorted(glob.glob(os.path.join(out, "base_*.json"))),
                        sorted(glob.glob(os.path.join(out, "new_*.json")))):
            rb = {r["loader"]: r["samples_per_s"] for r in json.load(open(b))["rows"] if r["workload"] == w}
            rn = {r["loader"]: r["samples_per_s"] for r in json.load(open(n))["rows"] if r["workload"] == w}
            per_round.append(f"{rn['stoker'] / rb['stoker']:.2f}")
        line.append("new/base per round: " + ", ".join(per_round))
        print("  ".join(line))


if __name__ == "__main__":
    main(sys.argv[1])
