"""The examples run end to end."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_mil_bag_sampling_example():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "mil_bag_sampling.py"), "--epochs", "3"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("epoch 2: loss") and "draws so far 300" in lines[-1], out.stdout
