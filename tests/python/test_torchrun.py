"""For real: `torchrun --nproc_per_node=2` (gloo, CPU) trains a tiny
DDP model on stoker.DataLoader(distributed=True) for two epochs.  Each rank's
samples are disjoint from the other's and together they are the dataset, in
every epoch.  A second job is SIGKILLed whole at a random step and restarted
from the newest checkpoint every rank completed (model + each rank's loader
state): the samples seen up to it plus those seen after the restart equal the
uninterrupted run's, in order."""
import os
import random
import shutil
import signal
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")


def launch(workdir, *args, port):
    env = torchrun_env(workdir)
    cmd = [TORCHRUN, "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
           os.path.join(HERE, "ddp_train.py"), "--dir", str(workdir), *args]
    # Its own session: the kill takes down torchrun, both ranks and their workers.
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, start_new_session=True)


def torchrun_env(workdir):
    """The environment for torchrun: this test's modules, one thread per rank,
    and temporary files in `workdir` (torchrun makes a log directory in
    TMPDIR for every run and leaves it there)."""
    tmp = os.path.join(str(workdir), "tmp")
    os.makedirs(tmp, exist_ok=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1", "TMPDIR": tmp}


def samples(workdir, rank, resumed=False):
    rows = []
    with open(os.path.join(workdir, f"samples_rank{rank}{'_resumed' if resumed else ''}.log")) as f:
        for line in f:
            step, epoch, *idx = map(int, line.split())
            rows.append((step, epoch, tuple(idx)))
    return rows


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="torchrun not installed")
def test_ddp_two_ranks_killed_and_resumed_see_exactly_the_uninterrupted_samples(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    r = launch(full, port=free_port())
    assert r.returncode == 0, r.stderr[-4000:]
    ref = {rank: samples(full, rank) for rank in (0, 1)}
    for epoch in (0, 1):
        parts = [[i for _s, e, idx in ref[rank] if e == epoch for i in idx] for rank in (0, 1)]
        assert len(parts[0]) == len(parts[1]) == 32
        assert not set(parts[0]) & set(parts[1]), f"epoch {epoch}: the ranks share samples"
        assert sorted(parts[0] + parts[1]) == list(range(64)), f"epoch {epoch}: not the whole dataset"
    assert [idx for _s, e, idx in ref[0] if e == 0] != [idx for _s, e, idx in ref[0] if e == 1]

    cut = tmp_path / "cut"
    cut.mkdir()
    kill_at = int(os.environ.get("STOKER_TEST_KILL_AT", 0)) or random.Random(os.getpid()).randint(4, 14)
    r = launch(cut, "--kill-at", str(kill_at), port=free_port())
    assert r.returncode != 0, "the job should have been killed"
    sys.path.insert(0, HERE)
    from ddp_train import complete_step
    saved_step = complete_step(str(cut), 2)  # what the restart resumes from
    assert 0 < saved_step < kill_at
    for rank in (0, 1):
        assert torch.load(cut / f"ckpt_rank{rank}_step{saved_step}.pt", weights_only=False)["step"] == saved_step
    r = launch(cut, "--resume", port=free_port())
    assert r.returncode == 0, r.stderr[-4000:]
    for rank in (0, 1):
        before = [row for row in samples(cut, rank) if row[0] <= saved_step]
        assert first_steps_ok(before, saved_step)
        combined = before + samples(cut, rank, resumed=True)
        assert combined == ref[rank], f"rank {rank}, killed at step {kill_at}, resumed from step {saved_step}"


def first_steps_ok(rows, n):
    return [r[0] for r in rows] == list(range(1, n + 1))
