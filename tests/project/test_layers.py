"""The package's architecture, checked from its own imports (every ``import``, function-level ones too,
read with ``ast``; nothing is imported).

One-way layers, bottom to top (a module may import its own layer's modules of the same package, and
any layer below its own, never one above, nor a sibling package of its own level)::

    utils < kernels < functional < nn < optim, amp < models < tasks < study.trace < training < oracle
          < study.gradchecking.upstream < study, testing, drills < cli

* ``utils`` imports nothing of the package.
* ``study.trace`` (and its helper ``study.trace_grads``) sits below ``training``, a finer order than
  the folder's: ``Trainer.train_step(trace=True)`` (``train --trace-every``) records its step with
  it. The trace itself imports only the core's hooks (``nn.hooks``) and ``utils``: the core reports
  through hooks it defines and the trace subscribes, so the core imports nothing above it.
* ``study.gradchecking.upstream`` (the checkers' own stream of upstream gradients) sits below its siblings:
  the drill grader draws its ``dout`` from that same stream (``drills/engine/upstream.py``), so
  that no checker's upstream gradient can coincide with a user's data. It imports nothing of the
  package.
* ``oracle.py`` is the one bridge to ``reference_torch`` (nothing else in the package names it in an
  import) and imports nothing of the package; the study tools, the drills and the CLI load the
  oracle through it.
* ``numpy_transformer/__init__.py`` (the public names, imported on first use) and ``__main__.py`` are
  the package's front door, above every layer.

No import cycle among the modules of the package, function-level imports included.
"""

from __future__ import annotations

import ast
import os

from _paths import REPO_ROOT

ROOT = str(REPO_ROOT)
PKG = "numpy_transformer"

#: bottom to top; each entry one level: its members (module-name prefixes below the package) are siblings
LEVELS = [
    ("utils",),
    ("kernels",),
    ("functional",),
    ("nn",),
    ("optim", "amp"),
    ("models",),
    ("tasks",),
    ("study.trace", "study.trace_grads"),
    ("training",),
    ("oracle",),
    ("study.gradchecking.upstream",),
    ("study", "testing", "drills"),
    ("cli",),
]
FRONT = ("", "__main__")           # numpy_transformer/__init__.py and __main__.py: above every layer



def _modules():
    """``{module name: path}`` of every module of the package."""
    out = {}
    for directory, dirs, files in os.walk(os.path.join(ROOT, PKG)):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(directory, f)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(mod, path):
    """``[(target, line, module_level)]``: every module of the package (or top-level name outside it)
    that ``mod`` imports; ``from pkg import name`` counts as ``pkg.name`` when that is a module."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_pkg = path.endswith("__init__.py")
    top = {id(n) for n in tree.body}
    for n in tree.body:                             # the bodies of module-level if/try count as module level
        if isinstance(n, (ast.If, ast.Try)):
            top.update(id(c) for c in ast.walk(n))
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = (mod if is_pkg else mod.rsplit(".", 1)[0]).split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        for name in names:
            while name and name.split(".")[0] == PKG and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                out.append((name, node.lineno, id(node) in top))
    return out


def _under(mod, prefix):
    full = f"{PKG}.{prefix}" if prefix else PKG
    return mod == full or mod.startswith(full + ".")


def level_of(mod):
    """``(index into LEVELS, sibling prefix)``; the most specific prefix wins (``study.trace``)."""
    best = None
    for i, members in enumerate(LEVELS):
        for p in members:
            if _under(mod, p) and (best is None or len(p) > len(best[1])):
                best = (i, p)
    return best


def _edges():
    for mod, path in sorted(MODULES.items()):
        for target, line, module_level in _imports(mod, path):
            if target != mod and not mod.startswith(target + "."):       # a package's parents: no edge
                yield mod, target, f"{os.path.relpath(path, ROOT)}:{line}", module_level


def test_every_module_has_a_layer():
    front = {f"{PKG}.{m}" if m else PKG for m in FRONT}
    homeless = sorted(m for m in MODULES if m not in front and level_of(m) is None)
    assert not homeless, f"modules outside every layer (add them to a layer's folder): {homeless}"


def test_at_most_three_loose_modules_at_the_top():
    loose = sorted(f for f in os.listdir(os.path.join(ROOT, PKG)) if f.endswith(".py"))
    assert loose == ["__init__.py", "__main__.py", "oracle.py"], loose


def test_the_layers_import_one_way():
    bad = []
    for mod, target, where, _ in _edges():
        if not target.startswith(PKG + ".") and target != PKG:
            continue
        if mod in (PKG, f"{PKG}.__main__"):
            continue                                                     # the front door
        if target == PKG:
            bad.append(f"{where}: {mod} imports the package's front door {PKG} (import the module itself)")
            continue
        (mi, mp), (ti, tp) = level_of(mod), level_of(target)
        if ti > mi:
            bad.append(f"{where}: {mod} (layer {'/'.join(LEVELS[mi])}) imports {target}, a layer above it")
        elif ti == mi and mp.split(".")[0] != tp.split(".")[0]:
            bad.append(f"{where}: {mod} imports {target}, a sibling package of the same level ({mp}, {tp})")
    assert not bad, "\n".join(bad)


def test_the_bottom_and_the_finer_levels_import_only_what_they_may():
    allowed = {
        "utils": ("utils",),
        "study.trace": ("utils", "nn.hooks", "study.trace", "study.trace_grads"),
        "study.trace_grads": ("utils", "study.trace_grads"),
        "oracle": (),
        "study.gradchecking.upstream": (),
    }
    bad = []
    for mod, target, where, _ in _edges():
        if not target.startswith(PKG + "."):
            continue
        for owner, may in allowed.items():
            if _under(mod, owner) and not any(_under(target, p) or f"{PKG}.{p}".startswith(target + ".")
                                               for p in may):      # (a package above an allowed module: its parent)
                bad.append(f"{where}: {mod} imports {target} (it may import only {may or 'nothing of the package'})")
    assert not bad, "\n".join(bad)


def test_the_core_imports_nothing_above_it():
    core = ("kernels", "functional", "nn")
    bad = [f"{where}: {mod} imports {target}" for mod, target, where, _ in _edges()
           if any(_under(mod, c) for c in core) and target.startswith(PKG + ".")
           and not any(_under(target, c) for c in core + ("utils",))]
    assert not bad, "\n".join(bad)


def test_oracle_is_the_only_bridge_to_reference_torch():
    found = sorted({mod for mod, target, _, _ in _edges() if target.split(".")[0] == "reference_torch"})
    assert found in ([], [f"{PKG}.oracle"]), found
    strings = []
    for mod, path in MODULES.items():
        if mod == f"{PKG}.oracle":
            continue
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                    in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).startswith("reference_torch")):
                strings.append(f"{mod}: {node.args[0].value}")
    assert not strings, strings


def _cycles(edges):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(frozenset(comp))
    return out


def test_no_import_cycle():
    edges = [(m, t) for m, t, _, _ in _edges() if t.startswith(PKG + ".")]
    found = [sorted(c) for c in _cycles(edges)]
    assert not found, f"import cycles: {found}"


def test_the_layer_checks_catch_a_back_import():
    """The checks are not vacuous: a core module importing the trace, or a model importing training,
    is found."""
    assert level_of(f"{PKG}.nn.module")[0] < level_of(f"{PKG}.study.trace")[0]
    assert level_of(f"{PKG}.models.gpt")[0] < level_of(f"{PKG}.training.trainer")[0]
    assert (level_of(f"{PKG}.study.trace")[0] < level_of(f"{PKG}.training.trainer")[0]
            < level_of(f"{PKG}.study.plotting")[0])
    assert level_of(f"{PKG}.study.gradchecking.pair")[0] == level_of(f"{PKG}.drills.engine.grader")[0]      # siblings
    assert _cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [frozenset("abc")]



def test_the_tests_mirror_the_packages():
    """Each test file lives in ``tests/<package>/``, named after the layer it proves (``tests/nn/`` for
    ``numpy_transformer/nn/``), or in ``tests/project/`` (the repository: README, scripts, layout, docs);
    none is left at the top of ``tests/`` (which holds only shared helpers and conftest)."""
    tests = os.path.join(ROOT, "tests")
    loose = sorted(f for f in os.listdir(tests) if f.startswith("test_") and f.endswith(".py"))
    assert not loose, f"test files at the top of tests/: {loose}"
    layers = {top for level in LEVELS for name in level for top in [name.split(".")[0]]} | {"project"}
    folders = sorted(d for d in os.listdir(tests) if os.path.isdir(os.path.join(tests, d))
                     and any(f.startswith("test_") for f in os.listdir(os.path.join(tests, d))))
    assert folders, "no test folders found"
    strays = [d for d in folders if d not in layers]
    assert not strays, f"test folders that name no layer of {PKG}: {strays} (layers: {sorted(layers)})"


def test_the_readme_map_names_every_layer_bottom_to_top():
    """The README opens with the map of the layers ("## The map", before "## Two commands"): every
    path in it exists, and its rows name the package's layer folders in the order of :data:`LEVELS`."""
    import re
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "## The map" in readme and readme.index("## The map") < readme.index("## Two commands"), \
        "the README's map must come before its two commands"
    block = readme.split("## The map", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    paths = [p for row in rows for p in re.findall(r"`([\w./]+/|[\w.]+\.(?:py|md))`", row.split("|")[1])]
    tops = ("numpy_transformer/", "reference_torch/", "tests/", "benchmarks/", "docs/", "DEVELOPERS.md")
    for p in paths:                          # `amp/` and `oracle.py` sit in the row of their package
        full = os.path.join(ROOT, p) if p.startswith(tops) else os.path.join(ROOT, PKG, p)
        assert os.path.exists(full), f"the README's map names {p}, which does not exist ({full})"
    named = []
    for p in (p for p in paths if p.endswith("/")):       # the layer folders (oracle.py is a module)
        top = p[len(PKG) + 1:] if p.startswith(PKG + "/") else p
        name = top.rstrip("/").split("/")[0].removesuffix(".py")
        if any(name == level_name for level in LEVELS for level_name in level) and name not in named:
            named.append(name)
    layers = [name for level in LEVELS for name in level
              if "." not in name and os.path.isdir(os.path.join(ROOT, PKG, name))]
    assert named == layers, f"the map's layers {named} are not the package's, bottom to top: {layers}"


#: issue 23: a file reads as one topic; past this many lines it is split by topic
MAX_LINES = 500
#: the folders whose Python files the limit covers (tests/drills/unlisted/ included: none of its files is near it)
SIZED = ("numpy_transformer", "reference_torch", "tests", "benchmarks")


def _python_files_above(limit, folders=SIZED, root=ROOT):
    """``(path relative to root, line count)`` of every ``.py`` file under ``folders`` with more than
    ``limit`` lines."""
    long = []
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as fh:
                        count = sum(1 for _ in fh)
                    if count > limit:
                        long.append((os.path.relpath(path, root), count))
    return long


def test_no_python_file_is_above_500_lines():
    assert all(os.path.isdir(os.path.join(ROOT, folder)) for folder in SIZED), SIZED
    long = _python_files_above(MAX_LINES)
    assert not long, f"files above {MAX_LINES} lines (split them by topic): {long}"


def test_the_line_limit_check_sees_a_long_file(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert _python_files_above(MAX_LINES, ("pkg",), str(tmp_path)) == [(os.path.join("pkg", "sub", "long.py"),
                                                                          MAX_LINES + 1)]
