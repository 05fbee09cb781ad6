"""Soak: the process tree's PSS and the system's Shmem after each
epoch stay within 5% of epoch 1, with persistent workers and with fresh
workers each epoch (bench/soak.py).  A short run is in the default suite; the
full 50 epochs run with `pytest -m stress` (STOKER_SOAK_EPOCHS to change).

Shmem is system-wide, so other processes on a shared machine move it too: a
change is allowed up to 5% or 2 MiB, whichever is larger."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "soak.py")


def soak(mode, epochs, samples):
    out = subprocess.run([sys.executable, SCRIPT, "--mode", mode, "--epochs", str(epochs), "--samples", str(samples)],
                         capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(r["pss"]) == epochs
    assert r["worst_pss_change"] < 0.05, f"tree PSS moved {100 * r['worst_pss_change']:.1f}%: {r['pss']}"
    allowed = max(0.05 * r["shmem"][0], 2 << 20)
    assert r["worst_shmem_change_bytes"] <= allowed, f"Shmem moved {r['worst_shmem_change_bytes']} bytes: {r['shmem']}"
    assert max(r["arena_bytes"]) <= 64 << 20, "the pool stays within max_memory"
    return r


@pytest.mark.parametrize("mode", ["persistent", "fresh"])
def test_short_soak(mode):
    soak(mode, epochs=6, samples=2048)


@pytest.mark.stress
@pytest.mark.parametrize("mode", ["persistent", "fresh"])
def test_full_soak(mode):
    r = soak(mode, epochs=int(os.environ.get("STOKER_SOAK_EPOCHS", "50")), samples=8192)
    print(json.dumps({k: r[k] for k in ("mode", "epochs", "worst_pss_change", "worst_shmem_change_bytes")}))
