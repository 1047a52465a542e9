"""The packages' namespaces come from their submodules' ``__all__``, never from a hand-kept list.

* every name in the ``__all__`` of a public submodule of ``nn``/``functional`` is the package's;
* every name of a lazy package's submodules (``study``) is reachable from the package, and
  ``nt.study.gradcheck`` is the function (its subpackage is ``study/gradchecking``);
* the top level offers every name of ``nn.__all__`` and its tools from the modules that declare them;
* a new ``nn/<topic>.py`` with an ``__all__`` is ``nt.nn.X`` and ``nt.X`` with no edit of any ``__init__``.
"""

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest
from _paths import REPO_ROOT

import numpy_transformer as nt
from numpy_transformer import nn
from numpy_transformer.utils.lazy import declared_all

ROOT = str(REPO_ROOT)


def _public_submodules(package):
    return [info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_")]


@pytest.mark.parametrize("package", ["nn", "functional"])
def test_every_submodule_name_is_the_packages(package):
    pkg = importlib.import_module(f"numpy_transformer.{package}")
    skip = getattr(pkg, "NAMESPACES", ())
    for sub in _public_submodules(pkg):
        module = importlib.import_module(f"{pkg.__name__}.{sub}")
        assert hasattr(module, "__all__"), f"{module.__name__} declares no __all__"
        for name in module.__all__:
            if sub in skip:
                assert name not in pkg.__all__ or getattr(pkg, name) is getattr(module, name)
                continue
            assert name in pkg.__all__, f"{module.__name__}.{name} is not in {pkg.__name__}.__all__"
            assert getattr(pkg, name) is getattr(module, name), f"{pkg.__name__}.{name}"


def test_packages_export_no_private_name():
    for pkg in (nn, nt.functional):
        assert not [n for n in pkg.__all__ if n.startswith("_")]


def test_the_namespace_modules_keep_their_names():
    assert nn.hooks.__name__ == "numpy_transformer.nn.hooks" and nn.attention.__name__.endswith("nn.attention")
    assert nt.functional.softmax.__name__ == "numpy_transformer.functional.softmax"


def test_declared_all_reads_the_source_as_the_import_does():
    for sub in _public_submodules(nn):
        module = importlib.import_module(f"numpy_transformer.nn.{sub}")
        assert declared_all(module.__file__) == list(module.__all__), sub


def test_study_offers_its_submodules_names_and_gradcheck_is_the_function():
    import numpy_transformer.study as study
    from numpy_transformer.study.gradchecking import gradcheck
    assert study.gradcheck is gradcheck is nt.gradcheck and callable(study.gradcheck)
    import numpy_transformer.study.gradchecking.pair  # noqa: F401 (the subpackage does not shadow the function)
    assert study.gradcheck is gradcheck
    for name in study.__all__:
        assert getattr(study, name) is not None
    assert study.run_ablation is importlib.import_module("numpy_transformer.study.ablation").run_ablation
    assert study.trace.__name__ == "numpy_transformer.study.trace"            # a submodule wins over a name
    with pytest.raises(AttributeError, match="no attribute 'gradchek'"):
        study.gradchek


def test_top_level_offers_nn_and_its_tools():
    for name in nn.__all__:
        assert getattr(nt, name) is getattr(nn, name), name
        assert name in nt.__all__
    for name, where in nt._NAMES.items():
        module = importlib.import_module(where, "numpy_transformer")
        assert name in module.__all__, f"{where} does not declare {name!r}"
        assert getattr(nt, name) is getattr(module, name)


def test_a_new_nn_module_is_public_with_no_edit_of_any_init(tmp_path):
    """A copy of the package with one more file, ``nn/probe_glu.py``: ``nt.nn.ProbeGLU`` and ``nt.ProbeGLU``."""
    import shutil
    shutil.copytree(os.path.join(ROOT, "numpy_transformer"), tmp_path / "numpy_transformer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "numpy_transformer" / "nn" / "probe_glu.py").write_text(textwrap.dedent('''
        from .module import Module
        __all__ = ["ProbeGLU"]
        class ProbeGLU(Module):
            pass
    '''))
    code = ("import numpy_transformer as nt\n"
            "assert nt.__file__.startswith(%r), nt.__file__\n"
            "assert nt.ProbeGLU is nt.nn.ProbeGLU and nt.ProbeGLU.__module__ == 'numpy_transformer.nn.probe_glu'\n"
            "assert 'ProbeGLU' in nt.__all__ and 'ProbeGLU' in nt.nn.__all__\n" % str(tmp_path))
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path)),
                   check=True)
