"""stoker.trace() and STOKER_TRACE (a Chrome trace-event file: tracks,
slices, flows, counters), the merge of ranks' files, the bottleneck verdict on
three injected bottlenecks (a slow __getitem__, a store at 50 ms a request
behind a real nginx, a 64 MiB budget with 8 MiB samples) and `stoker plot`."""
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import stoker
from stoker.io import RawDataset
from helpers import counting_shards
from nginx import Nginx

VOCABULARY = {"fetch", "read", "decode", "transform", "collate", "publish", "wait", "h2d"}


class Sleepy(torch.utils.data.Dataset):
    def __init__(self, n, sleep=0.0, size=256):
        self.n, self.sleep, self.size = n, sleep, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        return torch.full((self.size,), i % 251, dtype=torch.uint8)


def load(path):
    with open(path) as f:
        doc = json.load(f)
    assert isinstance(doc["traceEvents"], list)
    return doc, doc["traceEvents"]


def names(events, what):
    return {e["pid"] if what == "process_name" else (e["pid"], e["tid"]): e["args"]["name"]
            for e in events if e["ph"] == "M" and e["name"] == what}


def test_a_trace_has_a_track_per_process_slices_flows_and_counters(tmp_path):
    path = str(tmp_path / "run.json")
    loader = stoker.DataLoader(Sleepy(240, sleep=0.002), batch_size=8, num_workers=2)
    t0 = time.monotonic()
    with stoker.trace(path) as t:
        for _ in loader:
            time.sleep(0.002)
    took = time.monotonic() - t0
    assert t.written == path and not os.path.exists(path + f".parts.{os.getpid()}")
    doc, ev = load(path)
    procs = names(ev, "process_name")
    assert procs[os.getpid()] == "training loop"
    workers = {w["pid"] for w in loader.stats(False)["workers"]} if loader._iterator else set()
    assert sorted(v for p, v in procs.items() if p != os.getpid()) == ["worker 0", "worker 1"]
    assert all(p in procs for p in workers)
    slices = [e for e in ev if e["ph"] == "X"]
    assert {e["name"] for e in slices} <= VOCABULARY
    by = collections.Counter((e["pid"] != os.getpid(), e["name"]) for e in slices)
    assert by[(True, "read")] == 30 and by[(True, "collate")] == 30 and by[(True, "publish")] == 30
    assert by[(False, "wait")] >= 30
    assert all(e["dur"] >= 0 for e in slices)
    # a flow from each batch's publish to the next() that took it
    out = {e["id"]: e for e in ev if e["ph"] == "s"}
    into = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert len(out) == 30 and out.keys() == into.keys()
    for fid, s in out.items():
        f = into[fid]
        assert s["pid"] != os.getpid() and f["pid"] == os.getpid() and f["bp"] == "e"
        assert f["ts"] >= s["ts"]
        # each end inside a slice of its thread: the publish, and the loop's wait
        assert any(x["pid"] == s["pid"] and x["tid"] == s["tid"] and x["name"] == "publish" and
                   x["ts"] <= s["ts"] <= x["ts"] + x["dur"] for x in slices)
        assert any(x["pid"] == f["pid"] and x["tid"] == f["tid"] and x["name"] == "wait" and
                   x["ts"] <= f["ts"] <= x["ts"] + x["dur"] + 0.001 for x in slices)
    # counters at 20 Hz: the pool's bytes by state, batches by state, the workers' RSS
    counters = collections.defaultdict(list)
    for e in ev:
        if e["ph"] == "C":
            counters[e["name"]].append(e)
    assert set(counters) >= {"slot pool bytes", "batches", "worker rss bytes"}
    assert len(counters["slot pool bytes"]) >= 10 * took * 0.5
    assert set(counters["slot pool bytes"][0]["args"]) == {"free", "queued", "filling", "ready", "held"}
    # (each worker's RSS while it runs; the last sample, at the stop, may come after the epoch's end let them go)
    both = [e["args"] for e in counters["worker rss bytes"] if set(e["args"]) == {"worker 0", "worker 1"}]
    assert len(both) >= len(counters["worker rss bytes"]) - 2
    assert all(v > 1 << 20 for args in both for v in args.values())
    assert doc["otherData"]["anchor_realtime_ns"] > 0


def test_reader_threads_of_a_native_dataset_have_tracks_and_flows(tmp_path):
    data = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    raw = tmp_path / "x.raw"
    data.tofile(raw)
    ds = RawDataset(str(raw), dtype="float32", shape=(128,))
    loader = stoker.DataLoader(ds, batch_size=4, num_workers=2)
    path = str(tmp_path / "native.json")
    with stoker.trace(path):
        n = sum(1 for _ in loader)
    assert n == 16
    _doc, ev = load(path)
    threads = names(ev, "thread_name")
    assert {"reader 0", "reader 1"} <= set(threads.values())
    reads = [e for e in ev if e["ph"] == "X" and e["name"] == "read"]
    assert len(reads) == 16 and all(threads[(e["pid"], e["tid"])].startswith("reader") for e in reads)
    assert len({e["id"] for e in ev if e["ph"] == "s"}) == 16 == len({e["id"] for e in ev if e["ph"] == "f"})


def test_one_trace_at_a_time_and_off_by_default(tmp_path):
    from stoker._native import lib
    assert not lib.trace_recording()
    with stoker.trace(str(tmp_path / "a.json")):
        with pytest.raises(ValueError, match="already being recorded"):
            stoker.trace(str(tmp_path / "b.json")).start()
    assert not lib.trace_recording() and not (tmp_path / "b.json").exists()
    with pytest.raises(OSError, match="directory for the trace"):
        stoker.trace(str(tmp_path / "no" / "such" / "dir.json")).start()


SCRIPT = """
import sys, torch, stoker
class D(torch.utils.data.Dataset):
    def __len__(self): return 64
    def __getitem__(self, i): return torch.tensor(i)
if __name__ == "__main__":
    for _ in stoker.DataLoader(D(), batch_size=8, num_workers=1, multiprocessing_context=sys.argv[1]):
        pass
"""


def test_stoker_trace_in_the_environment_writes_one_file_per_rank_and_they_merge(tmp_path):
    """Rank 0's workers are forked (they record into its trace), rank 1's
    spawned (they record nothing, and start no trace of their own)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for rank, context in ((0, "fork"), (1, "spawn")):
        env = dict(os.environ, STOKER_TRACE=str(tmp_path / "run.json"), WORLD_SIZE="2", RANK=str(rank))
        subprocess.run([sys.executable, str(script), context], env=env, check=True, timeout=120)
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("run"))
    assert files == ["run.rank0.json", "run.rank1.json"]  # (no parts left, no file from a spawned worker)
    for f in files:
        _doc, ev = load(tmp_path / f)
        procs = names(ev, "process_name")
        assert sorted(procs.values())[0] == f"training loop (rank {f[8]})"
        if f == "run.rank0.json":
            assert "worker 0" in procs.values()
            assert len([e for e in ev if e["ph"] == "s"]) == 8
        else:
            assert list(procs.values()) == ["training loop (rank 1)"] * len(procs)
    out = tmp_path / "merged.json"
    subprocess.run([sys.executable, "-m", "stoker", "trace-merge", str(tmp_path / "run.rank0.json"),
                    str(tmp_path / "run.rank1.json"), "-o", str(out)], check=True, timeout=60)
    _doc, ev = load(out)
    procs = names(ev, "process_name")
    assert {v.split(":")[0] for v in procs.values()} == {"run.rank0.json", "run.rank1.json"}
    a, b = (load(tmp_path / f)[1] for f in files)
    assert len(ev) == len(a) + len(b)


def verdict(loader, sleep_in_loop=0.0):
    for _ in loader:
        if sleep_in_loop:
            time.sleep(sleep_in_loop)
    return loader.stats(False)["bottleneck"]


def test_the_verdict_names_a_slow_getitem_every_time():
    for _ in range(3):
        b = verdict(stoker.DataLoader(Sleepy(160, sleep=0.005), batch_size=8, num_workers=2))
        assert b["stage"] == "getitem", b
        assert abs(sum(b["wait_by_stage"].values()) - 1) < 1e-3 and b["wait_by_stage"]["getitem"] > 0.8
        assert "num_workers" in b["advice"]


def test_the_verdict_names_the_memory_budget_every_time():
    for _ in range(3):
        b = verdict(stoker.DataLoader(Sleepy(48, sleep=0.02, size=8 << 20), batch_size=1, num_workers=4,
                                      max_memory=64 << 20))
        assert b["stage"] == "memory_budget", b
        assert abs(sum(b["wait_by_stage"].values()) - 1) < 1e-3
        assert "max_memory" in b["advice"]


def test_the_verdict_names_the_training_loop_when_the_loader_keeps_ahead():
    b = verdict(stoker.DataLoader(Sleepy(160), batch_size=8, num_workers=2), sleep_in_loop=0.01)
    assert b["stage"] == "training_loop", b


def test_the_verdict_names_a_slow_store_every_time(tmp_path):
    from stoker.cache import StreamingDataset
    www = counting_shards(tmp_path / "www", 30, 8)
    server = Nginx(tmp_path / "nginx", www).start()
    try:
        for attempt in range(3):
            ds = StreamingDataset(server.url + "/paced", str(tmp_path / f"cache{attempt}"), max_bytes=0, mode="full",
                                  features={"y": ("int64", ())}, fetchers=1, prefetch=1)
            loader = stoker.DataLoader(ds, batch_size=8, num_workers=2)
            if attempt == 0:  # traced: the downloads, the readers' waits for them, the streaming counters
                with stoker.trace(str(tmp_path / "store.json")):
                    b = verdict(loader)
                _doc, ev = load(tmp_path / "store.json")
                threads = names(ev, "thread_name")
                fetches = [e for e in ev if e["ph"] == "X" and e["name"] == "fetch"]
                assert len(fetches) == 30 and {threads[(e["pid"], e["tid"])] for e in fetches} == {"fetcher"}
                assert sorted(e["dur"] for e in fetches)[len(fetches) // 2] > 10_000, [e["dur"] for e in fetches]
                assert any(e["name"] == "wait" and e.get("args", {}).get("for") == "store" for e in ev)
                streaming = [e["args"] for e in ev if e["ph"] == "C" and e["name"] == "streaming"]
                assert streaming and streaming[-1]["downloads"] >= 29 and streaming[-1]["bytes_fetched"] > 0
            else:
                b = verdict(loader)
            assert b["stage"] == "store", b
            assert "fetchers" in b["advice"]
    finally:
        server.stop()


def test_progress_prints_the_verdict_at_the_end_of_an_epoch(capfd):
    for _ in stoker.DataLoader(Sleepy(80, sleep=0.005), batch_size=8, num_workers=2, progress=True):
        pass
    err = capfd.readouterr().err
    assert "bound: getitem" in err and "bottleneck: getitem" in err and "num_workers" in err


def test_plot_draws_a_trace(tmp_path):
    pytest.importorskip("matplotlib")
    path = str(tmp_path / "run.json")
    with stoker.trace(path):
        for _ in stoker.DataLoader(Sleepy(80, sleep=0.002), batch_size=8, num_workers=2):
            pass
    png = tmp_path / "run.png"
    subprocess.run([sys.executable, "-m", "stoker", "plot", path, "-o", str(png)], check=True, timeout=120)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    r = subprocess.run([sys.executable, "-m", "stoker", "plot", str(bad), "-o", str(png)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "bad.json" in r.stderr


def test_the_image_pipelines_decodes_are_on_the_reader_threads_clock_and_trace(tmp_path):
    """stoker.vision's codecs live in another extension module, with its own
    copy of the core: its stages reach the reader thread's one clock and the
    one trace (core/stage_runtime.h)."""
    vision = pytest.importorskip("stoker.vision")
    from stoker.bench.images import make_images
    make_images(str(tmp_path / "imgs"), 24, classes=2)
    ds = vision.ImageFolder(str(tmp_path / "imgs"), transform=vision.Compose(
        [vision.Resize(64), vision.CenterCrop(64), vision.ToDtype("float32", scale=True)]))
    loader = stoker.DataLoader(ds, batch_size=4, num_workers=2)
    with stoker.trace(str(tmp_path / "img.json")):
        b = verdict(loader)
    assert b["stage"] == "decode", b
    _doc, ev = load(tmp_path / "img.json")
    threads = names(ev, "thread_name")
    decodes = [e for e in ev if e["ph"] == "X" and e["name"] == "decode"]
    assert len(decodes) == 24 and {threads[(e["pid"], e["tid"])] for e in decodes} <= {"reader 0", "reader 1"}
    assert len([e for e in ev if e["ph"] == "X" and e["name"] == "transform"]) == 24
    reads = [e for e in ev if e["ph"] == "X" and e["name"] == "read"]
    for d in decodes:  # each inside a read of its thread
        assert any(r["tid"] == d["tid"] and r["ts"] <= d["ts"] and d["ts"] + d["dur"] <= r["ts"] + r["dur"] + 0.01
                   for r in reads)


def test_parquet_row_groups_are_decode_slices(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from stoker.io import ParquetDataset
    pq.write_table(pa.table({"x": np.arange(4000, dtype=np.int64)}), tmp_path / "t.parquet", row_group_size=500)
    loader = stoker.DataLoader(ParquetDataset(str(tmp_path / "t.parquet")), batch_size=100, num_workers=2)
    with stoker.trace(str(tmp_path / "pq.json")):
        assert sum(len(b["x"]) for b in loader) == 4000
    _doc, ev = load(tmp_path / "pq.json")
    assert len([e for e in ev if e["ph"] == "X" and e["name"] == "decode"]) == 8  # one per row group
    # (its counters, from its own extension module's copy of the core, reach the one sampler)
    counters = [e["args"] for e in ev if e["ph"] == "C" and e["name"] == "parquet"]
    assert counters and counters[-1]["row_groups_decoded"] == 8 and counters[-1]["decoded_bytes"] > 0


def test_bench_plot_draws_the_table(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [{"workload": w, "loader": k, "samples_per_s": r} for w, t, s in (("a", 7e4, 1.1e6), ("c", 430, 2960))
            for k, r in (("torch", t), ("stoker", s))]
    code = ("import json, sys\nfrom stoker._plot import plot_bench\n"
            "print(plot_bench(json.loads(sys.argv[1]), sys.argv[2]))\n")  # (matplotlib keeps its fonts open)
    subprocess.run([sys.executable, "-c", code, json.dumps({"rows": rows, "cpus": 2, "torch_version": "2.13.0"}),
                    str(tmp_path / "bench.png")], check=True, timeout=120)
    data = (tmp_path / "bench.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
