"""Runs PyTorch's own DataLoader tests against stoker.DataLoader.

The tests are torch's test/test_dataloader.py, unmodified, from Debian's
source package of PyTorch 2.6.0 (trixie): the newest PyTorch source that this
machine's registries (PyPI, Debian) serve; PyPI has no source of torch.  The
file is fetched once into build/torch_suite, checked against its digest, and
run with the stoker_torch_suite plugin (beside this file), which swaps the
DataLoader in every process of the run.

    python tests/torch_suite/run.py [pytest args]
    STOKER_TORCH_SUITE_LOADER=torch python tests/torch_suite/run.py   # torch's own loader
    STOKER_TORCH_TEST_FILE=/path/test_dataloader.py ...               # another release's file
"""
import hashlib
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORK = os.path.join(ROOT, "build", "torch_suite")
SOURCE = "http://deb.debian.org/debian/pool/main/p/pytorch/pytorch_2.6.0+dfsg.orig.tar.xz"
SHA256 = "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"
MEMBER = "pytorch-v2.6.0/test/test_dataloader.py"


def fetch() -> str:
    dest = os.path.join(WORK, "test_dataloader.py")
    if os.path.exists(dest):
        return dest
    # Kept per user too (a fresh clone on the same machine, as CI's, reads it
    # there instead of fetching and unpacking the PyTorch source archive again).
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stoker",
                         f"torch-suite-{SHA256[:16]}", "test_dataloader.py")
    if os.path.exists(cache):
        os.makedirs(WORK, exist_ok=True)
        shutil.copy(cache, dest)
        return dest
    os.makedirs(WORK, exist_ok=True)
    archive = os.path.join(WORK, "pytorch-src.tar.xz")
    print(f"== fetching torch's test_dataloader.py from {SOURCE}", flush=True)
    with urllib.request.urlopen(SOURCE, timeout=120) as r, open(archive, "wb") as f:
        shutil.copyfileobj(r, f)
    digest = hashlib.sha256(open(archive, "rb").read()).hexdigest()
    if digest != SHA256:
        os.unlink(archive)
        sys.exit(f"{SOURCE}: sha256 {digest}, expected {SHA256}; not using it")
    with tarfile.open(fileobj=lzma.open(archive)) as tar:
        data = tar.extractfile(MEMBER).read()
    with open(dest + ".tmp", "wb") as f:
        f.write(data)
    os.replace(dest + ".tmp", dest)
    os.unlink(archive)
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        shutil.copy(dest, cache + ".tmp")
        os.replace(cache + ".tmp", cache)
    except OSError:
        pass  # (a read-only home: fetched again next time)
    return dest


def main() -> int:
    test_file = os.environ.get("STOKER_TORCH_TEST_FILE") or fetch()
    run_dir = os.path.join(WORK, "run")
    os.makedirs(run_dir, exist_ok=True)
    shutil.copy(test_file, os.path.join(run_dir, "test_dataloader.py"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
    env.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "stoker_torch_suite",
           "-o", "faulthandler_timeout=300", "-rfEs", "test_dataloader.py", *sys.argv[1:]]
    print(f"== torch's DataLoader tests on {env.get('STOKER_TORCH_SUITE_LOADER', 'stoker')}'s loader", flush=True)
    return subprocess.run(cmd, cwd=run_dir, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
