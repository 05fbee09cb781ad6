"""The pytest plugin of the torch-suite run (run.py beside it): PyTorch's own
DataLoader tests (test/test_dataloader.py of a torch release, unmodified)
with torch.utils.data.DataLoader replaced by stoker.DataLoader, as a
conftest would, in this process and (sitecustomize.py) in every process it
spawns.  docs/compatibility.md has the result and each test left out here.

STOKER_TORCH_SUITE_LOADER=torch runs the same tests on torch's own loader
(nothing left out), to show which failures are the test file's and not
stoker's."""
import os
import subprocess
import sys

import pytest

LOADER = os.environ.get("STOKER_TORCH_SUITE_LOADER", "stoker")

# Tests that fail on torch's own DataLoader too, with this file and torch
# 2.13.0: they check behaviour of the release the file came from.  Each is
# explained in docs/compatibility.md.
FAILS_ON_TORCH_TOO = {
    "TestDataLoader::test_get_worker_info":
        "torch 2.13's WorkerInfo is a frozen dataclass: assigning to it raises FrozenInstanceError, where the "
        "file expects RuntimeError",
    "TestDataLoaderPersistentWorkers::test_get_worker_info": "as TestDataLoader::test_get_worker_info",
    "TestDataLoader::test_segfault":
        "marked xfailIfLinux in the file; torch 2.13 reports the segfault, so it passes unexpectedly",
    "TestDataLoaderPersistentWorkers::test_segfault": "as TestDataLoader::test_segfault",
    "TestOutOfOrderDataLoader::test_out_of_order_index_ds":
        "torch 2.13 hands batches to workers differently with in_order=False than the file's release did",
}


def pytest_configure(config):
    if LOADER not in ("stoker", "torch"):
        raise pytest.UsageError(f"STOKER_TORCH_SUITE_LOADER={LOADER!r}: 'stoker' or 'torch'")
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        raise pytest.UsageError(f"put {here} on PYTHONPATH (bash scripts/run.sh torch-suite does), so that "
                                "spawned test processes load stoker's DataLoader too")
    # A spawned process (as the tests' own subprocesses are) must see the swap.
    probe = ("import torch.utils.data, stoker; "
             "print(torch.utils.data.DataLoader is stoker.DataLoader)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    if out != str(LOADER == "stoker"):
        raise pytest.UsageError(f"a new Python process loads the wrong DataLoader (swapped: {out})")


def pytest_collection_modifyitems(config, items):
    import torch.utils.data

    import stoker
    assert (torch.utils.data.DataLoader is stoker.DataLoader) == (LOADER == "stoker")
    module = sys.modules.get("test_dataloader")
    assert module is not None and (module.DataLoader is stoker.DataLoader) == (LOADER == "stoker")
    if LOADER == "torch":
        return
    keep, left_out = [], []
    for item in items:
        name = item.nodeid.split("::", 1)[-1]
        (left_out if name in FAILS_ON_TORCH_TOO else keep).append(item)
    missing = set(FAILS_ON_TORCH_TOO) - {i.nodeid.split("::", 1)[-1] for i in left_out}
    if missing:
        raise pytest.UsageError(f"tests named in FAILS_ON_TORCH_TOO are not in the file: {sorted(missing)}")
    config.hook.pytest_deselected(items=left_out)
    items[:] = keep
