"""What an installed package offers besides the library: the version, the
command as a module, the type information (py.typed and the extension's stub,
kept in step with the bindings), and torch as an extra."""
import ast
import os
import subprocess
import sys

import stoker
from stoker import _native as N


def test_version_from_the_command_and_the_module():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for cmd in ([sys.executable, "-m", "stoker", "--version"], [sys.executable, "-m", "stoker.cli", "--version"]):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"stoker {stoker.__version__}"
    out = subprocess.run([sys.executable, "-m", "stoker"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2 and "bench" in out.stderr  # argparse's usage: a command is required


def test_type_information_is_installed_and_the_stubs_match_the_extensions():
    from stoker import _stoker_vision
    here = os.path.dirname(stoker.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    for name, module in (("_stoker", N.lib), ("_stoker_vision", _stoker_vision)):
        tree = ast.parse(open(os.path.join(here, name + ".pyi")).read())
        declared = next(ast.literal_eval(node.value) for node in tree.body
                        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "__all__")
        public = sorted(n for n in dir(module) if not n.startswith("_"))
        assert sorted(declared) == public, (f"python/stoker/{name}.pyi is out of step with the bindings: regenerate "
                                            "it (its first lines say how)")


def test_torch_is_an_extra():
    import tomllib
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    meta = tomllib.load(open(os.path.join(root, "pyproject.toml"), "rb"))["project"]
    assert not any(d.split(">")[0].split("=")[0].strip() == "torch" for d in meta["dependencies"])
    assert any(d.startswith("torch") for d in meta["optional-dependencies"]["torch"])


_MAPS = """
import re
def mapped():
    return {re.sub(r"\\.so.*", "", line.split("/")[-1].strip()) for line in open("/proc/self/maps") if ".so" in line}
"""


def _run(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", _MAPS + code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_plain_loader_maps_neither_libcurl_nor_protobuf(tmp_path):
    # libcurl (and its dozens of libraries) live in stoker._stoker_remote,
    # loaded when an http(s):// or s3:// store is opened; tf.train.Example is
    # read without protobuf.  A TFRecord read and a local stream need neither.
    out = _run(f"""
import numpy as np, torch, stoker, stoker.io, stoker.cache
ds = torch.utils.data.TensorDataset(torch.arange(64.0))
assert sum(len(b[0]) for b in stoker.DataLoader(ds, batch_size=8, num_workers=2)) == 64
path = {str(tmp_path / "a.tfrecord")!r}
stoker.io.write_tfrecord(path, [{{"x": np.arange(3, dtype=np.float32) + i}} for i in range(10)])
rec = stoker.io.TFRecordDataset(path, features={{"x": ("float32", (3,))}})
assert float(rec[4]["x"][0]) == 4.0
before = mapped()
assert not any(n.startswith(("libcurl", "libprotobuf")) for n in before), sorted(before)
assert "_stoker_remote.cpython-311-x86_64-linux-gnu" not in before
stoker.cache.Store("http://127.0.0.1:9/data")  # (opening connects to nothing)
after = mapped()
assert "libcurl" in after and not any(n.startswith("libprotobuf") for n in after), sorted(after)
print("ok")
""")
    assert out.strip().endswith("ok")


def test_images_are_a_module_of_their_own_loaded_by_stoker_vision_only():
    # The codecs (libjpeg-turbo, libspng) live in stoker._stoker_vision: a
    # loader over anything but images never maps them, and a stoker built
    # without them (-DSTOKER_VISION=OFF) loads and runs the same.
    out = _run("""
import sys, numpy as np, torch, stoker, stoker.io, stoker.streaming
ds = torch.utils.data.TensorDataset(torch.arange(64.0))
assert sum(len(b[0]) for b in stoker.DataLoader(ds, batch_size=8, num_workers=2)) == 64
before = mapped()
assert "stoker._stoker_vision" not in sys.modules
assert "_stoker_vision.cpython-311-x86_64-linux-gnu" not in before, sorted(before)
assert not any(n.startswith(("libturbojpeg", "libspng")) for n in before), sorted(before)
import stoker.vision as v
assert "_stoker_vision.cpython-311-x86_64-linux-gnu" in mapped()
try:
    v.decode_image(b"not an image")
except ValueError as e:
    assert "stoker:" in str(e), e
else:
    raise AssertionError("decoded garbage")
print("ok")
""")
    assert out.strip().endswith("ok")


def test_a_missing_vision_module_is_named_with_the_fix():
    out = _run("""
import sys, torch, stoker, stoker.io
sys.modules["stoker._stoker_vision"] = None  # (a build without images, as an import sees it)
try:
    import stoker.vision
except ImportError as e:
    msg = str(e)
    assert "stoker._stoker_vision" in msg and "STOKER_VISION=OFF" in msg and "reinstall stoker" in msg, msg
else:
    raise AssertionError("stoker.vision imported without its module")
ds = torch.utils.data.TensorDataset(torch.arange(8.0))
assert sum(len(b[0]) for b in stoker.DataLoader(ds, batch_size=4, num_workers=1)) == 8
print("ok")
""")
    assert out.strip().endswith("ok")


def test_a_missing_remote_module_is_named_with_the_fix():
    out = _run("""
import sys, stoker.cache
sys.modules["stoker._stoker_remote"] = None  # (what a broken install looks like to an import)
for url in ("http://127.0.0.1:9/data", "s3://bucket/prefix"):
    try:
        stoker.cache.Store(url)
    except Exception as e:
        msg = str(e)
        assert "stoker._stoker_remote" in msg and "libcurl" in msg and "reinstall stoker" in msg, msg
    else:
        raise AssertionError("opened " + url)
stoker.cache.Store(".")  # a directory needs no libcurl
print("ok")
""")
    assert out.strip().endswith("ok")
