"""Full mode's memory buffers within the memory a process may use.

Full mode streams the shards its cache has no room for through memory
buffers the size of the largest shard, made as the fetchers need them.
With large shards the default count (2 * shuffle_window + fetchers) can be
more memory than the process has: under a cgroup limit, allocating them took
the OOM killer.  Here a process in a 640 MiB memory cgroup opens a dataset of
48 MiB shards with no cache: the default count shrinks to fit a quarter of
the limit (at least a shuffle window and one more), and a window that cannot
fit half of it is a MemoryError naming the sizes, not a killed process.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import limited_cgroup
from stoker.cache import write_index
from stoker.io import write_tfrecord

TESTS = os.path.dirname(os.path.abspath(__file__))
LIMIT = 640 << 20
RECORD = 1 << 18  # float32: 1 MiB
SHARDS, PER_SHARD = 3, 48  # 48 MiB shards

SCRIPT = textwrap.dedent("""
    import json, sys
    import stoker
    from stoker.cache import StreamingDataset
    remote, local, window = sys.argv[1], sys.argv[2], int(sys.argv[3])
    features = {{"x": ("float32", ({record},)), "y": ("int64", ())}}
    try:
        ds = StreamingDataset(remote, local, max_bytes=0, mode="full", features=features, shuffle_window=window)
    except MemoryError as e:
        print(json.dumps({{"error": str(e)}}))
        sys.exit(0)
    buffers = ds.stats()["stream_buffer_bytes"]
    ys = []
    for b in stoker.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2):
        assert (b["x"][:, 0].long() == b["y"]).all() and (b["x"][:, -1].long() == b["y"]).all()
        ys.extend(b["y"].tolist())
    st = ds.stats()
    ds.close()
    print(json.dumps({{"buffers": buffers, "ys": sorted(ys), "stats": st}}))
""").format(record=RECORD)


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("remote"))
    for s in range(SHARDS):
        ids = range(s * PER_SHARD, (s + 1) * PER_SHARD)
        write_tfrecord(os.path.join(root, f"shard-{s}.tfrecord"),
                       ({"x": np.full(RECORD, i, np.float32), "y": np.int64(i)} for i in ids))
    write_index(root)
    return root


def run_limited(remote, local, window):
    with limited_cgroup(LIMIT, "streammem") as cg:
        cmd = f"echo $$ > {cg}/cgroup.procs && exec {sys.executable} -c \"$STOKER_SCRIPT\" {remote} {local} {window}"
        env = {**os.environ, "STOKER_SCRIPT": SCRIPT, "PYTHONPATH": os.pathsep.join(sys.path)}
        r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode} (-9: the OOM killer)\n" + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_default_stream_buffers_fit_a_quarter_of_the_memory_limit(remote, tmp_path):
    out = run_limited(remote, str(tmp_path / "cache"), 4)
    each = PER_SHARD * (RECORD * 4 + 16 + 64) // (2 << 20) * (2 << 20)  # whole huge pages
    assert out.get("error") is None, out
    # 2 * 4 + 2 = 10 buffers would be 480 MiB of 640; a quarter of the limit
    # holds 3, and a shuffle window and one more is 5.  None is made before
    # the fetchers need one.
    assert out["stats"]["stream_buffers"] == 5, out["stats"]
    assert out["buffers"] == 0 and 0 < out["stats"]["stream_buffer_bytes"] <= 5 * each <= LIMIT // 2, out
    assert out["ys"] == list(range(SHARDS * PER_SHARD))
    assert out["stats"]["streamed"] == SHARDS and out["stats"]["fetch_errors"] == 0, out["stats"]


def test_a_window_that_cannot_fit_half_the_memory_limit_is_a_clear_error(remote, tmp_path):
    out = run_limited(remote, str(tmp_path / "cache"), 6)  # 7 buffers of 48 MiB: 336 MiB > 320
    m = out.get("error") or ""
    assert "7 buffers (stream_buffers, at least shuffle_window + 1)" in m, out
    assert f"more than half of the {LIMIT} bytes this process may use" in m, m
    assert "lower shuffle_window, give the cache room on disk (max_bytes)" in m, m
