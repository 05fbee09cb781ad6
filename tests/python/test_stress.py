"""Stress: create -> iterate -> random fault or stop -> destroy, many
times (bench/stress_cycles.py).  A short run is part of the default suite; the
full 10,000 cycles run with `pytest -m stress` (STOKER_STRESS_CYCLES to change)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "stress_cycles.py")


def run_cycles(cycles, spawn_fraction, seed, timeout):
    proc = subprocess.run([sys.executable, SCRIPT, "--loader", "stoker", "--cycles", str(cycles),
                           "--spawn-fraction", str(spawn_fraction), "--seed", str(seed), "--hang-s", "120"],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, (summary, proc.stderr[-3000:])
    assert summary["cycles"] == cycles
    assert summary["leaked_processes"] == 0 and summary["left_processes"] == 0
    assert summary["left_arena_fds"] == 0 and summary["left_files"] == []
    assert summary["unexpected_count"] == 0, summary["unexpected"]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return summary


def test_short_stress():
    s = run_cycles(60, 0.05, seed=1, timeout=600)
    assert s["shutdown_latency_ms_max"] < 1000


@pytest.mark.stress
def test_full_stress():
    cycles = int(os.environ.get("STOKER_STRESS_CYCLES", "10000"))
    s = run_cycles(cycles, 0.05, seed=7, timeout=5 * 3600)
    print(json.dumps(s))
