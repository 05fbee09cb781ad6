#!/usr/bin/env bash
# Proves the repaired wheel on a bare system (issue 30): a Debian 12 root made
# with debootstrap holding only python3 and python3-venv from apt, where pip
# installs dist/stoker-*manylinux*.whl, torch==2.13.0 and numpy, and
# tests/bare/check.py runs the drop-in loader, a TFRecord read, an HTTP
# stream and a JPEG decode inside it (chroot).  Needs root and Debian's
# mirror; not part of the default test run (minutes).  Build the wheel first:
# bash scripts/run.sh wheel.
#   bash scripts/bare_system.sh [ROOT]     (default build/bare-root, kept for reruns)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(realpath -m "${1:-build/bare-root}")"
wheel="${STOKER_WHEEL:-$(ls dist/stoker-*manylinux*.whl 2>/dev/null | head -1 || true)}"
[ -n "$wheel" ] || { echo "bare_system.sh: no repaired wheel in dist/ (bash scripts/run.sh wheel)" >&2; exit 1; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
if [ ! -x "$ROOT/usr/bin/python3" ]; then
  echo "== debootstrap: Debian 12 with python3 and python3-venv only, in $ROOT"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$ROOT" http://deb.debian.org/debian >/dev/null
fi
# Commands in the root run with a clean environment, as on a fresh machine
# (this host's variables name its own files: CA bundles, pip's find-links).
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$ROOT" "$@"; }
cleanup() { umount "$ROOT/proc" "$ROOT/dev" 2>/dev/null || true; }
trap cleanup EXIT
mount -t proc proc "$ROOT/proc"
mount --bind /dev "$ROOT/dev"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
rm -rf "$ROOT/opt/check" && mkdir -p "$ROOT/opt/check"
cp "$wheel" tests/bare/check.py "$ROOT/opt/check/"
cp tests/fuzz/corpus/image/jpeg_RGB "$ROOT/opt/check/sample.jpg.fuzz"
# torch's CPU wheel from where this machine keeps it (pip's find-links; 2.13.0+cpu ranks
# above PyPI's 2.13.0, so pip takes it), numpy from PyPI.
links=()
for d in ${PIP_FIND_LINKS:-} /opt/wheels; do
  [ -d "$d" ] && ls "$d"/torch-2.13.0* >/dev/null 2>&1 && { mkdir -p "$ROOT/opt/wheels"; cp -n "$d"/torch-2.13.0* "$ROOT/opt/wheels/"; links=(--find-links /opt/wheels); break; }
done
# This machine's network may answer through a proxy with its own CA (pip's
# `cert` setting): the root's pip trusts what the host's pip trusts.
cert_args=""
cert="${PIP_CERT:-$(pip3 config get global.cert 2>/dev/null || true)}"
if [ -n "$cert" ] && [ -f "$cert" ]; then
  cp "$cert" "$ROOT/opt/check/ca.crt"
  cert_args="--cert /opt/check/ca.crt"
fi
# The proof holds only if the root lacks every library the wheel carries.
present="$(in_root sh -c 'ls /usr/lib/x86_64-linux-gnu' | grep -E "libcurl|libprotobuf|libisal|libturbojpeg|libjpeg|libspng" || true)"
if [ -n "$present" ]; then
  echo "bare_system.sh: $ROOT is not bare, it has: $present" >&2
  exit 1
fi
echo "== the root has none of libcurl, protobuf, ISA-L, libjpeg-turbo, libspng"
echo "== pip install $(basename "$wheel") torch==2.13.0 numpy"
in_root sh -c "rm -rf /venv && python3 -m venv /venv && /venv/bin/pip install -q $cert_args ${links[*]} \
  /opt/check/$(basename "$wheel") torch==2.13.0 numpy"
echo "== the check"
in_root /venv/bin/python /opt/check/check.py /opt/check/sample.jpg.fuzz
