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


def test_type_information_is_installed_and_the_stub_matches_the_extension():
    here = os.path.dirname(stoker.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    stub = os.path.join(here, "_stoker.pyi")
    tree = ast.parse(open(stub).read())
    declared = next(ast.literal_eval(node.value) for node in tree.body
                    if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "__all__")
    public = sorted(name for name in dir(N.lib) if not name.startswith("_"))
    assert sorted(declared) == public, ("python/stoker/_stoker.pyi is out of step with the bindings: regenerate it "
                                        "(its first lines say how)")


def test_torch_is_an_extra():
    import tomllib
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    meta = tomllib.load(open(os.path.join(root, "pyproject.toml"), "rb"))["project"]
    assert not any(d.split(">")[0].split("=")[0].strip() == "torch" for d in meta["dependencies"])
    assert any(d.startswith("torch") for d in meta["optional-dependencies"]["torch"])
