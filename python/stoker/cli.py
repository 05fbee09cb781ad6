"""The `stoker` command."""
from __future__ import annotations

import argparse
import sys


def _version() -> str:
    """The installed distribution's version (the package's own without one)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("stoker")
    except (ImportError, PackageNotFoundError):
        import stoker
        return stoker.__version__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="stoker", description="stoker data-loading engine")
    parser.add_argument("--version", action="version", version=f"stoker {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="compare torch.utils.data.DataLoader and stoker.DataLoader side by side")
    b.add_argument("--workloads", default="abci",
                   help="which workloads to run (letters of a, b, c, i: JPEG images; default abci)")
    b.add_argument("--seconds", type=float, default=3.0, help="time budget per loader and workload (default 3)")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--plot", metavar="PNG", help="also draw the table as a chart into this file (needs matplotlib)")
    p = sub.add_parser("pack", help="turn a directory of .npy/raw files into TFRecord or tar shards")
    p.add_argument("src", help="directory of .npy files (one sample each) or raw files (--dtype/--shape)")
    p.add_argument("out", help="directory for the shards")
    p.add_argument("--format", choices=("tfrecord", "tar"), default="tfrecord")
    p.add_argument("--shard-samples", type=int, default=10000, help="samples per shard at most (default 10000)")
    p.add_argument("--shard-bytes", type=int, default=1 << 30, help="bytes per shard at most (default 1 GiB)")
    p.add_argument("--feature", default="data", help="TFRecord feature name (default 'data')")
    p.add_argument("--dtype", help="raw files: element type of a record (e.g. float32)")
    p.add_argument("--shape", type=lambda s: tuple(int(x) for x in s.split(",")),
                   help="raw files: shape of a record, e.g. 1024,1024")
    x = sub.add_parser("index", help="write the index of a directory of shards for stoker.streaming.StreamingDataset")
    x.add_argument("dir", help="directory of .tfrecord / .tar shards")
    x.add_argument("--name", default="index.txt", help="index file name (default index.txt)")
    x.add_argument("--format", choices=("tfrecord", "tar"), help="only shards of this format")
    g = sub.add_parser("plot", help="draw a trace (stoker.trace / STOKER_TRACE): the loop's stall, each worker's "
                                    "busy time, the slot pool's memory by state, the autotuner's choices")
    g.add_argument("trace", help="a trace file stoker wrote")
    g.add_argument("-o", "--output", help="the picture (default: the trace's name with .png)")
    m = sub.add_parser("trace-merge", help="align several ranks' traces (run.rank*.json) into one timeline")
    m.add_argument("traces", nargs="+", help="trace files stoker wrote")
    m.add_argument("-o", "--output", required=True, help="the merged trace")
    args = parser.parse_args(argv)
    if args.command == "bench":
        try:
            import torch  # noqa: F401 - the bench compares against torch's DataLoader
        except ModuleNotFoundError:
            print("stoker bench: compares against torch.utils.data.DataLoader and needs PyTorch: "
                  "`pip install torch`, then run it again", file=sys.stderr)
            return 1
        from stoker import bench
        result = bench.run(args.workloads, args.seconds, as_json=args.json, progress=not args.no_progress)
        if args.plot:
            from stoker._plot import plot_bench
            try:
                print(f"stoker bench: the chart is in {plot_bench(result, args.plot)}", file=sys.stderr)
            except (ImportError, OSError) as e:
                print(f"stoker bench --plot: {e}", file=sys.stderr)
                return 1
    elif args.command == "plot":
        from stoker._plot import plot_trace
        out = args.output or (args.trace[:-5] if args.trace.endswith(".json") else args.trace) + ".png"
        try:
            print(plot_trace(args.trace, out))
        except (ImportError, OSError, ValueError, KeyError, TypeError) as e:
            print(f"stoker plot: {args.trace}: {e}", file=sys.stderr)
            return 1
    elif args.command == "trace-merge":
        from stoker._trace import merge
        try:
            print(merge(args.traces, args.output))
        except (OSError, ValueError, KeyError) as e:
            print(f"stoker trace-merge: {e}", file=sys.stderr)
            return 1
    elif args.command == "pack":
        from stoker._pack import pack
        if args.shard_samples < 1 or args.shard_bytes < 1:
            parser.error("--shard-samples and --shard-bytes must be >= 1")
        try:
            pack(args.src, args.out, args.format, args.shard_samples, args.shard_bytes, args.feature,
                 args.dtype, args.shape)
        except (ValueError, OSError) as e:
            print(f"stoker pack: {e}", file=sys.stderr)
            return 1
    elif args.command == "index":
        from stoker.streaming import write_index
        try:
            path = write_index(args.dir, args.name, args.format)
        except (ValueError, OSError) as e:
            print(f"stoker index: {e}", file=sys.stderr)
            return 1
        with open(path) as f:
            n = sum(1 for line in f if line.strip() and not line.startswith("#"))
        print(f"{path}: {n} shards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
