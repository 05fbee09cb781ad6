"""The training frameworks that rebuild loaders keep stoker: HF accelerate
(two processes under torchrun, gloo) and PyTorch Lightning (DDP on two CPU
processes).  Real packages, installed by scripts/run.sh test."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")

accelerate = pytest.importorskip("accelerate")


def torchrun(script, *args, port):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([TORCHRUN, "--nproc_per_node=2", f"--master_port={port}", os.path.join(HERE, script),
                           *args], capture_output=True, text=True, timeout=180, env=env)


def test_accelerate_two_processes_load_in_stoker_workers_sharded(tmp_path):
    out = torchrun("accelerate_train.py", str(tmp_path), port=29531)
    assert out.returncode == 0, out.stderr[-4000:]
    ranks = [json.load(open(tmp_path / f"rank-{r}.json")) for r in (0, 1)]
    for r in ranks:
        assert r["world"] == 2 and r["distributed_type"] == "DistributedType.MULTI_CPU"
        assert r["is_stoker"] and r["max_memory"] == 32 << 20, "accelerate's loader is stoker underneath"
        for b in r["seen"]:
            assert r["pid"] not in b["pids"], "items were loaded in worker processes, not the rank's own"
            assert set(b["workers"]) <= {0, 1} and b["device"] == "cpu"
    for epoch in (0, 1):
        mine = [sorted(i for b in r["seen"] if b["epoch"] == epoch for i in b["indices"]) for r in ranks]
        assert not set(mine[0]) & set(mine[1]), "the two processes' shards are disjoint"
        assert sorted(mine[0] + mine[1]) == list(range(96)), "together they are the dataset"
    orders = [[i for b in ranks[0]["seen"] if b["epoch"] == e for i in b["indices"]] for e in (0, 1)]
    assert orders[0] != orders[1], "set_epoch reshuffles"


PLAIN_PREPARE = """
import warnings, torch, stoker, stoker.accelerate
from accelerate import Accelerator
acc = Accelerator(cpu=True)
ds = torch.utils.data.TensorDataset(torch.arange(64.0))
loader = stoker.DataLoader(ds, batch_size=4, num_workers=2, max_memory=64 << 20)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    plain = acc.prepare(loader)
assert not isinstance(plain, stoker.DataLoader)
mine = [w for w in caught if "stoker" in str(w.message)]
msgs = [str(w.message) for w in mine]
assert len(msgs) == 1 and "stoker.accelerate.prepare(accelerator" in msgs[0], msgs
# The warning names the user's line (acc.prepare above), not accelerate's inside it.
assert (mine[0].filename, mine[0].lineno) == ("<string>", 9), (mine[0].filename, mine[0].lineno)
loader = stoker.DataLoader(ds, batch_size=4, num_workers=2, max_memory=64 << 20)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kept = stoker.accelerate.prepare(acc, loader)
assert not [w for w in caught if "stoker" in str(w.message)]
assert isinstance(kept, stoker.DataLoader) and kept.base_dataloader.max_memory == 64 << 20
assert sum(len(b[0]) for b in kept) == 64 and kept.stats()["max_memory"] == 64 << 20
print("ok")
"""


def test_a_silent_rebuild_by_accelerator_prepare_warns_and_names_the_fix():
    out = subprocess.run([sys.executable, "-c", PLAIN_PREPARE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


def run_lightning(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="always::UserWarning")
    return subprocess.run([sys.executable, os.path.join(HERE, "lightning_train.py"), *args], capture_output=True,
                          text=True, timeout=300, env=env)


def test_lightning_ddp_keeps_stoker_and_resumes_mid_epoch_from_its_checkpoint(tmp_path):
    """Lightning rebuilds the loader (a DistributedSampler per rank) as a
    stoker.DataLoader, saves its state_dict in a mid-epoch checkpoint, and a
    new Trainer resumes from it: every rank's steps after the checkpoint see
    the indices of the uninterrupted run.  Lightning writes one checkpoint
    (rank 0's): rank 0 also draws the same augmentations; rank 1 is told
    that its workers' random streams cannot be continued."""
    pytest.importorskip("lightning")
    dirs = {m: tmp_path / m for m in ("full", "interrupt", "resume")}
    for d in dirs.values():
        d.mkdir()
    ckpt = str(tmp_path / "mid.ckpt")
    outs = {"full": run_lightning("full", str(dirs["full"])),
            "interrupt": run_lightning("interrupt", str(dirs["interrupt"]), ckpt)}
    outs["resume"] = run_lightning("resume", str(dirs["resume"]), ckpt)
    for mode, out in outs.items():
        assert out.returncode == 0, f"{mode}: {out.stderr[-4000:]}"
    assert "this loader state was saved by process rank 0, and this is rank 1" in outs["resume"].stderr
    for rank in (0, 1):
        full, before, after = (json.load(open(dirs[m] / f"rank-{rank}.json")) for m in ("full", "interrupt",
                                                                                        "resume"))
        assert {s["loader"] for s in full + before + after} == {"stoker.dataloader"}
        assert all(set(s["workers"]) <= {0, 1} for s in full), "items loaded in stoker's workers"
        key = {(s["epoch"], s["step"]): s["items"] for s in full}
        got = {(s["epoch"], s["step"]): s["items"] for s in before + after}
        assert sorted(got) == sorted(key) and len(before) + len(after) == len(full), "each step once"
        for k in key:
            assert [i for i, _ in got[k]] == [i for i, _ in key[k]], f"rank {rank}, step {k}: other indices"
            if rank == 0 or k[0] == 1:  # a new epoch reseeds: rank 1 is exact again
                assert got[k] == key[k], f"rank {rank}, step {k}: other random draws"
