"""Every Python snippet in README.md and docs/ runs, so what the docs promise
cannot drift from what the package does.

A snippet runs as written in a fresh interpreter, in a directory holding the
files it names.  One that opens with an import must import all it uses; any
other may assume `import stoker` (a fragment of a longer program).
Names a snippet leaves to the reader (`dataset`, `model`, ...) come from
PRELUDES, keyed by the snippet's first line; a remote store's address is
replaced by a local directory holding the same shards (SUBSTITUTIONS).  A
snippet added to the docs without a prelude runs with none."""
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                              if f.endswith(".md"))

STREAM_SHARDS = """
import numpy as np, os, stoker
os.makedirs("train", exist_ok=True)
for s in range(2):
    stoker.io.write_tfrecord(f"train/shard-{s}.tfrecord",
                             ({"x": np.full(4096, i, np.float32), "y": np.int64(i)} for i in range(64 * s, 64 * s + 64)))
stoker.cache.write_index("train")
os.makedirs("cache", exist_ok=True)
epochs = 2
"""

PRELUDES = {
    "from stoker import DataLoader": """
import torch
dataset = torch.utils.data.TensorDataset(torch.arange(512.0))
""",
    "from stoker import shared": """
import torch
from pathlib import Path
os.makedirs("imgs/a", exist_ok=True)
for k in range(5):
    open(f"imgs/a/{k}.jpg", "wb").close()
label_of = lambda p: len(str(p))
load = lambda p: torch.zeros(3)
""",
    "from stoker import io": """
import numpy as np
os.makedirs("data", exist_ok=True)
stoker.io.write_tfrecord("data/0.tfrecord", ({"x": np.full(1000, i, np.float32), "y": np.int64(i)} for i in range(32)))
""",
    "from stoker import vision": """
from stoker.bench.images import make_images
make_images("train", 16, classes=2)
""",
    "ds = stoker.streaming.StreamingDataset(": STREAM_SHARDS,
    "from stoker.streaming import StreamingDataset": STREAM_SHARDS,
    "names = stoker.shared.StringList(": """
generator_of_str = (f"name-{i}" for i in range(100))
n = 100
""",
    "ckpt = {": """
import torch
model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = stoker.DataLoader(torch.utils.data.TensorDataset(torch.arange(64.0)), batch_size=4, shuffle=True,
                           num_workers=2)
epoch, step = 0, 0
it = iter(loader)
next(it)
""",
    "sampler = stoker.shared.BagSampler(": """
import torch
features = torch.zeros(100, 64, 8)
label = torch.zeros(100)
bag = 3
new_weights = [1.0] * 64
""",
}

# What each snippet is checked for after it ran (its objects are in scope).
AFTERWARDS = {
    "from stoker import DataLoader": "assert isinstance(batch, list) and batch[0].shape == (64,)",
    "from stoker import shared": """
ds = Images("imgs")
assert len(ds) == 5 and ds[0][0].shape == (3,)
assert sum(len(b[1]) for b in stoker.DataLoader(ds, batch_size=2, num_workers=2)) == 5
""",
    "from stoker import io": "assert sum(len(b['y']) for b in loader) == 32",
    "ds = stoker.streaming.StreamingDataset(": "assert sum(len(b['y']) for b in loader) == 128",
    "from stoker.streaming import StreamingDataset": "assert ds.stats() is not None",
    "names = stoker.shared.StringList(": "assert len(names) == 100 and names[3] == 'name-3' and labels.numpy().shape == (100,)",
    "ckpt = {": "assert step == 0",
    "sampler = stoker.shared.BagSampler(": "assert len(MIL()[bag][0]) == 4",
}

SUBSTITUTIONS = [("http://store:8080/train", "TRAIN_DIR"), ("/nvme/cache", "cache")]


def snippets():
    out = []
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        for k, m in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S)):
            code = m.group(1)
            line = text[:m.start()].count("\n") + 2
            out.append(pytest.param(doc, line, code, id=f"{doc}:{line}"))
    return out


def test_the_docs_have_snippets():
    assert len(snippets()) >= 8


@pytest.mark.parametrize("doc,line,code", snippets())
def test_snippet_runs(doc, line, code, tmp_path):
    missing = [m for m in re.findall(r"^(?:import|from) (\w+)", code, re.M) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{doc}:{line} needs {', '.join(missing)}, not installed here")
    first = code.strip().splitlines()[0]
    key = next((k for k in PRELUDES if k in code), None)
    for old, new in SUBSTITUTIONS:
        code = code.replace(old, new)
    # `...` as a loop body or a line of its own is the docs' "your code here".
    code = code.replace("TRAIN_DIR", f"file://{tmp_path}/train")
    standalone = first.startswith(("import ", "from "))
    program = "\n".join([
        "import os, stoker",
        textwrap.dedent(PRELUDES.get(key, "")),
        "for _name in ('stoker', 'torch', 'np', 'os', 'Path'):\n    globals().pop(_name, None)" if standalone else "",
        f"# ---- {doc}, line {line}",
        code,
        "import os, stoker, torch",
        textwrap.dedent(AFTERWARDS.get(key, "")),
        "print('snippet ok')",
    ])
    path = tmp_path / "snippet.py"
    path.write_text(program)
    out = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and "snippet ok" in out.stdout, \
        f"{doc}, the snippet at line {line} fails:\n{program}\n---\n{out.stderr[-3000:]}"


def test_submodules_are_attributes_of_stoker():
    code = ("import stoker\n"
            "assert stoker.shared.Array and stoker.io.TFRecordDataset and stoker.streaming.StreamingDataset\n"
            "assert stoker.cache is stoker.streaming  # (its name before)\n"
            "assert stoker.distributed.ShardedSampler and stoker.errors.WorkerCrashed\n"
            "try:\n    stoker.nope\nexcept AttributeError as e:\n    assert \"no attribute 'nope'\" in str(e)\n"
            "else:\n    raise SystemExit('stoker.nope did not raise')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


# Python as a user without torch has it: `import torch` fails as if it were absent.
NO_TORCH = "import sys\nsys.modules['torch'] = None\n"


def test_without_torch_the_dataloader_says_what_to_install():
    code = NO_TORCH + ("import stoker\n"
                       "try:\n    stoker.DataLoader\n"
                       "except ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "needs PyTorch" in out.stdout and "pip install torch" in out.stdout and "output='numpy'" in out.stdout


def test_stoker_bench_without_torch_says_what_to_install():
    code = NO_TORCH + "from stoker.cli import main\nraise SystemExit(main(['bench', '--seconds', '0.1']))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "needs PyTorch" in out.stderr and "pip install torch" in out.stderr and "Traceback" not in out.stderr


def test_stats_describe_the_last_iterator_after_its_epoch():
    import torch

    import stoker
    loader = stoker.DataLoader(torch.utils.data.TensorDataset(torch.arange(94 * 4.0)), batch_size=4, num_workers=2)
    assert loader.stats() == {}
    for _b in loader:
        pass
    st = loader.stats()
    assert st["throughput"]["batches"] == 94 and st["workers"] and st["max_memory"] == loader.max_memory
    it = iter(loader)
    next(it)
    assert loader.stats()["throughput"]["batches"] == 1  # the live iterator again
    del it


def test_progress_without_tqdm_ends_at_the_last_batch():
    code = ("import sys\nsys.modules['tqdm'] = None\nsys.modules['tqdm.auto'] = None\n"
            "import torch, stoker\n"
            "ds = torch.utils.data.TensorDataset(torch.arange(94 * 4.0))\n"
            "for _ in stoker.DataLoader(ds, batch_size=4, num_workers=2, progress=True):\n    pass\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    last = out.stderr.strip().split("\r")[-1]
    assert "94/94 batches" in last, out.stderr[-500:]
