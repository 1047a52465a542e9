"""A drill is NumPy alone: a submission may not import ``numpy_transformer``, ``reference_torch`` or ``torch``.

Two layers. :func:`scan` reads the source (never runs it) and finds ``import``/``from`` statements and
``__import__("...")`` / ``importlib.import_module("...")`` calls with a literal name; the grader refuses such
a file before starting anything. :func:`seal`, in the grading child before the file is imported, removes
those packages from ``sys.modules`` and puts :class:`RefuseFinder` first on ``sys.meta_path``, so an import
the scan could not see (a name built at run time) fails with the same message.
"""

from __future__ import annotations

import ast
import sys

#: the packages a submission may not import
FORBIDDEN = ("numpy_transformer", "reference_torch", "torch")


def message(name):
    """The refusal's text for an import of ``name``."""
    return (f"imports {name!r}: a drill is NumPy alone, so a submission may not import numpy_transformer, "
            "reference_torch or torch (the grader's reference); write it yourself with numpy")


def forbidden(name):
    """True when the module ``name`` is one of :data:`FORBIDDEN` or inside one."""
    root = (name or "").split(".", 1)[0]
    return root in FORBIDDEN


class RefusedImport(ImportError):
    """An import of a forbidden package, at run time."""


def _literal(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def scan(source):
    """``[(line, module name)]`` of the forbidden imports in ``source`` (empty when none, or unparsable)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            called = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if called in ("__import__", "import_module"):
                names = [_literal(node.args[0]) or ""]
        found += [(node.lineno, n) for n in names if forbidden(n)]
    return sorted(found)


class RefuseFinder:
    """A ``sys.meta_path`` finder that refuses the forbidden packages (and answers nothing else)."""

    def find_spec(self, name, path=None, target=None):
        if forbidden(name):
            raise RefusedImport(message(name))
        return None


def seal():
    """In the grading child: forget the forbidden packages and refuse to import them again.

    The grading code already running keeps the modules it holds; ``import numpy_transformer`` (or a lookup
    in ``sys.modules``) from the submission finds nothing and raises :class:`RefusedImport`.
    """
    for name in [n for n in sys.modules if forbidden(n)]:
        del sys.modules[name]
    sys.meta_path.insert(0, RefuseFinder())
