"""The source tree keeps its shape: src/'s folders are layers (src/README.md,
"Layers"), and no include goes from a lower layer to a higher one or across
one layer; stoker's Python modules import one another without a cycle, and
none of them is over 600 lines (a file that grows past it has a seam to
split along)."""
import ast
import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = re.compile(r'\s*#\s*include\s+"([a-z_0-9]+)/([A-Za-z_0-9.]+)"')


def layer_table():
    """{folder: layer} and {public header: folder}, from src/README.md."""
    text = open(os.path.join(REPO, "src", "README.md")).read()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers, headers = {}, {}
    for line in section.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*`([a-z_]+)`\s*\|(.*)\|\s*$", line)
        if m:
            layers[m.group(2)] = int(m.group(1))
            for h in re.findall(r"`([a-z_0-9]+\.h)`", m.group(3)):
                headers[h] = m.group(2)
    assert layers, "src/README.md has no layer table"
    return layers, headers


def violations(layers, headers):
    out = []

    def check(where, folder, path):
        for n, line in enumerate(open(path), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            d, h = m.groups()
            target = headers.get(h) if d == "stoker" else d
            if target is None or target not in layers:
                out.append(f"{where}:{n}: {d}/{h} is in no layer of src/README.md")
            elif target != folder and layers[target] >= layers[folder]:
                out.append(f"{where}:{n}: {folder} (layer {layers[folder]}) includes {d}/{h} "
                           f"({target}, layer {layers[target]})")

    for folder in sorted(os.listdir(os.path.join(REPO, "src"))):
        p = os.path.join(REPO, "src", folder)
        if not os.path.isdir(p):
            continue
        if folder not in layers:
            out.append(f"src/{folder}/ is in no layer of src/README.md")
            continue
        for f in sorted(os.listdir(p)):
            check(f"src/{folder}/{f}", folder, os.path.join(p, f))
    for h in sorted(os.listdir(os.path.join(REPO, "include", "stoker"))):
        if h not in headers:
            out.append(f"include/stoker/{h} belongs to no folder in src/README.md")
            continue
        check(f"include/stoker/{h}", headers[h], os.path.join(REPO, "include", "stoker", h))
    return out


def test_no_include_goes_up_or_across_the_layers():
    layers, headers = layer_table()
    assert not violations(layers, headers), "\n".join(violations(layers, headers))


def test_the_check_sees_an_include_that_goes_up(tmp_path):
    # The same rule on a table where io sat above streaming: streaming's
    # headers include io's, so each of those is reported.
    layers, headers = layer_table()
    upside_down = dict(layers, io=layers["streaming"] + 1)
    found = violations(upside_down, headers)
    assert any(v.startswith("src/streaming/") and "includes io/" in v for v in found), found
    assert any("is in no layer" in v for v in violations({k: v for k, v in layers.items() if k != "core"},
                                                          headers))


def python_imports():
    """{module: the stoker modules it imports, at any level of the file
    (imports inside functions too; those under `if TYPE_CHECKING` are not
    run and are left out)}."""
    root = os.path.join(REPO, "python")
    files = {}
    for dirpath, _dirs, names in os.walk(os.path.join(root, "stoker")):
        for f in names:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3].replace(os.sep, ".")
                files[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(dirpath, f)
    graph = {}
    for name, path in files.items():
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        found = set()

        class Visitor(ast.NodeVisitor):
            def visit_If(self, node):
                t = node.test
                if getattr(t, "id", None) == "TYPE_CHECKING" or getattr(t, "attr", None) == "TYPE_CHECKING":
                    for n in node.orelse:
                        self.visit(n)
                    return
                self.generic_visit(node)

            def visit_Import(self, node):
                found.update(a.name for a in node.names)

            def visit_ImportFrom(self, node):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for a in node.names:
                    found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base)

        Visitor().visit(ast.parse(open(path).read()))
        # (every submodule imports its package first: edges to "stoker" itself say nothing)
        graph[name] = sorted(m for m in found if m in files and m not in (name, "stoker"))
    return graph


def cycles(graph):
    """The strongly connected components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_stokers_modules():
    graph = python_imports()
    assert "stoker.dataloader" in graph and "stoker._loader_iter" in graph["stoker.dataloader"], graph
    found = cycles(graph)
    assert not found, "\n".join(f"{c}: " + "; ".join(f"{m} -> {[x for x in graph[m] if x in c]}" for m in c)
                                for c in found)


def test_the_cycle_check_sees_a_cycle():
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


def test_no_python_module_is_over_600_lines():
    root = os.path.join(REPO, "python", "stoker")
    long = {}
    for dirpath, _dirs, names in os.walk(root):
        for f in names:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f)) as fh:
                    n = sum(1 for _ in fh)
                if n > 600:
                    long[os.path.relpath(os.path.join(dirpath, f), REPO)] = n
    assert not long, f"split these along their seams: {long}"

