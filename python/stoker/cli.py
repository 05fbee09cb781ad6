"""The `stoker` command."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="stoker", description="stoker data-loading engine")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="compare torch.utils.data.DataLoader and stoker.DataLoader side by side")
    b.add_argument("--workloads", default="abc", help="which workloads to run (letters of a, b, c; default abc)")
    b.add_argument("--seconds", type=float, default=3.0, help="time budget per loader and workload (default 3)")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.command == "bench":
        from stoker import bench
        bench.run(args.workloads, args.seconds, as_json=args.json, progress=not args.no_progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
