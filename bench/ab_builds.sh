#!/usr/bin/env bash
# `stoker bench` for two builds of stoker, rounds alternating, JSON per run.
#   bash bench/ab_builds.sh BASE_SITE OUT_DIR [ROUNDS]
# BASE_SITE holds the other build's package, made for example with
#   git worktree add /tmp/base REV && (cd /tmp/base && .venv/bin/pip wheel --no-deps
#   --no-build-isolation -w dist .) && .venv/bin/pip install --no-deps --target BASE_SITE /tmp/base/dist/*.whl
# The installed package (.venv) is the other side.  Summarize with bench/ab_summary.py OUT_DIR.
set -euo pipefail
base="$1"; out="$2"; rounds="${3:-3}"
py="$(dirname "$0")/../.venv/bin/python"
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  PYTHONPATH="$base" "$py" -m stoker.cli bench --seconds 3 --json --no-progress > "$out/base_$r.json"
  "$py" -m stoker.cli bench --seconds 3 --json --no-progress > "$out/new_$r.json"
done
