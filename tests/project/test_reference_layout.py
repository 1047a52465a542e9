"""The oracle's house rules, checked from the files and their imports (read with ``ast``) and from the
two tables themselves.

* ``reference_torch/`` is laid out as the library: its twins sit in ``nn/`` and ``models/``, each file
  named as the file of ``numpy_transformer/nn/`` or ``numpy_transformer/models/`` it twins; at the top
  only the package's own modules (``convert``, ``table``, ``lockstep``, ``drill_oracle``) and ``check/``.
* ``convert`` is a leaf: it imports nothing of ``reference_torch``.
* Registration by definition: a regular op's registry case (``numpy_transformer.testing.OpCase``) names
  torch's function as a dotted string (``OpCase.torch``), resolved on the torch side; only the
  irregular ops keep an adapter in ``reference_torch.table.ADAPTERS``, and none is kept for an op whose
  case names a torch function. Adding a regular op is one registry case and no torch-table edit.
* No module of ``reference_torch/`` or ``numpy_transformer/testing/`` imports another module's
  underscore name (``from .x import _y``, ``x._y``): what is shared is public.
"""

from __future__ import annotations

import ast
import dataclasses
import os

import numpy as np
import pytest
from _paths import REPO_ROOT

torch = pytest.importorskip("torch")

from numpy_transformer import testing as registry  # noqa: E402
from reference_torch import table  # noqa: E402

ROOT = str(REPO_ROOT)
REF = os.path.join(ROOT, "reference_torch")
TOP_LEVEL = {"__init__.py", "convert.py", "table.py", "lockstep.py", "drill_oracle.py"}
FOLDERS = {"nn", "models", "check"}


def _py_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".py"))


def _tree(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


# --------------------------------------------------------------------------------------------------
# the layout
# --------------------------------------------------------------------------------------------------

def test_reference_torch_top_level_holds_only_its_own_modules():
    folders = {d for d in os.listdir(REF) if os.path.isdir(os.path.join(REF, d)) and not d.startswith((".", "__"))}
    assert folders == FOLDERS, f"reference_torch/ folders {sorted(folders)}, expected {sorted(FOLDERS)}"
    loose = set(_py_files(REF)) - TOP_LEVEL
    assert not loose, (f"loose modules at reference_torch/'s top: {sorted(loose)}; a twin belongs in nn/ or "
                       "models/ under the name of the library file it twins")


@pytest.mark.parametrize("folder", ["nn", "models"])
def test_each_twin_file_mirrors_a_library_file(folder):
    ours = set(_py_files(os.path.join(ROOT, "numpy_transformer", folder)))
    twins = set(_py_files(os.path.join(REF, folder))) - {"__init__.py"}
    assert twins, f"reference_torch/{folder}/ holds no twin"
    orphans = sorted(twins - ours)
    assert not orphans, (f"reference_torch/{folder}/{orphans} twin no file of numpy_transformer/{folder}/ "
                         f"(its files: {sorted(ours - {'__init__.py'})})")


def test_check_is_a_package_run_by_python_dash_m():
    files = set(_py_files(os.path.join(REF, "check")))
    assert {"__init__.py", "__main__.py"} <= files, f"reference_torch/check/ holds {sorted(files)}"


def test_convert_is_a_leaf():
    found = []
    for node in ast.walk(_tree(os.path.join(REF, "convert.py"))):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("reference_torch")):
            found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import ...")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("reference_torch")]
    assert not found, f"reference_torch/convert.py imports its own package: {found}"


# --------------------------------------------------------------------------------------------------
# registration by definition
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(registry.OPS))
def test_every_op_case_has_a_torch_side(name):
    case = registry.OPS[name]
    if case.torch is not None:
        assert case.torch.split(".")[0] == "torch", f"{name}: OpCase.torch={case.torch!r} is not torch's"
        fn = table.resolve(case.torch)
        assert callable(fn), f"{name}: OpCase.torch={case.torch!r} names a {type(fn).__name__}, not a function"
        assert case.torch_args is None or callable(case.torch_args) or isinstance(case.torch_args, dict), name
    else:
        assert callable(table.ADAPTERS.get(name)), (f"{name}: its case names no torch function and "
                                                     "reference_torch.table.ADAPTERS has no adapter for it")
    assert callable(table.OPS[name])


def test_no_adapter_for_an_op_whose_case_names_torch():
    named = sorted(n for n, c in registry.OPS.items() if c.torch is not None)
    assert named, "no registry case names its torch function"
    redundant = sorted(set(named) & set(table.ADAPTERS))
    assert not redundant, f"table.ADAPTERS keeps adapters for {redundant}, whose cases name torch's function"
    unknown = sorted(set(table.ADAPTERS) - set(registry.OPS))
    assert not unknown, f"table.ADAPTERS has adapters for ops the registry lacks: {unknown}"
    assert set(table.OPS) == set(registry.OPS)


def test_a_regular_op_needs_only_its_registry_case(monkeypatch):
    """A new case naming torch's function (arguments renamed) is computed by torch with no table edit."""
    case = dataclasses.replace(registry.OPS["softmax"], name="softmax_copy")
    monkeypatch.setitem(registry.OPS, "softmax_copy", case)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    np.testing.assert_array_equal(table.torch_op("softmax_copy")(x=x, axis=1), torch.softmax(x, dim=1))
    # a function as torch_args computes torch's arguments from ours
    shift = dataclasses.replace(case, torch="torch.add", torch_args=lambda x, axis: {"input": x, "other": axis})
    monkeypatch.setitem(registry.OPS, "softmax_copy", shift)
    np.testing.assert_array_equal(table.torch_op("softmax_copy")(x=x, axis=1), x + 1)


def test_an_op_without_a_torch_side_is_refused_by_name(monkeypatch):
    monkeypatch.setitem(registry.OPS, "orphan", dataclasses.replace(registry.OPS["relu"], name="orphan", torch=None))
    with pytest.raises(LookupError, match=r"op 'orphan' has no torch side: its registry case names no torch "
                                          r"function \(OpCase.torch\) and reference_torch.table.ADAPTERS"):
        table.torch_op("orphan")
    with pytest.raises(KeyError, match="no op 'no_such_op' in the registry"):
        table.torch_op("no_such_op")


def test_resolve_names_what_is_missing():
    assert table.resolve("torch.nn.functional.layer_norm") is torch.nn.functional.layer_norm
    with pytest.raises(LookupError, match=r"'torch.nn.functional.no_such_op': torch.nn.functional has no "
                                          r"attribute 'no_such_op'"):
        table.resolve("torch.nn.functional.no_such_op")
    with pytest.raises(LookupError, match=r"'no_such_package.f': no module 'no_such_package' to import"):
        table.resolve("no_such_package.f")


# --------------------------------------------------------------------------------------------------
# no underscore names across modules
# --------------------------------------------------------------------------------------------------

def _underscore_imports(path):
    tree, found, modules = _tree(path), [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}")
                modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
    ours = {m for m in modules if m not in ("torch", "np", "nn", "F", "TF", "math", "warnings", "copy", "sys")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ours
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def _sources():
    for top in ("reference_torch", os.path.join("numpy_transformer", "testing")):
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.relpath(os.path.join(folder, f), ROOT)


def test_no_underscore_name_crosses_a_module():
    found = {rel: _underscore_imports(os.path.join(ROOT, rel)) for rel in _sources()}
    found = {rel: hits for rel, hits in found.items() if hits}
    assert not found, f"underscore names imported from another module (make them public or move them): {found}"
