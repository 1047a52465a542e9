"""A drill is NumPy alone: what a submission may not use, found before it runs or refused when it runs.

Two layers. :func:`scan` reads the source (never runs it) and finds

* imports of ``numpy_transformer``, ``reference_torch`` or ``torch`` (``import``/``from`` statements and
  ``__import__("...")`` / ``importlib.import_module("...")`` calls with a literal name);
* the tools that reach into a running program or the library's files instead of computing the answer:
  the modules ``gc``, ``inspect``, ``importlib``, ``ctypes``, ``runpy`` and ``builtins``, the frame
  machinery (``sys._getframe``, ``sys._current_frames``, a frame's ``f_back``/``f_locals``/``f_globals``,
  a traceback's ``tb_frame``), the dynamic code of ``exec``/``eval``/``compile``, and a file call
  (``open``, ``Path``, ``run_path``, ``np.load`` ...) whose arguments spell ``numpy_transformer`` or
  ``reference_torch``.

The grader refuses such a file before starting anything. The scan sees literal names only; a name built
at run time (``getattr(__builtins__, "ev" + "al")``) passes it, which is why the grading child holds
nothing of the library to find (:mod:`.spawn`). :func:`seal`, in the grading child before the file is
imported, removes the forbidden packages from ``sys.modules`` and puts :class:`RefuseFinder` first on
``sys.meta_path``, so an import the scan could not see fails with the same message.

This module imports the standard library only: the grading child loads it by file path.
"""

import ast
import sys

#: the packages a submission may not import (the library, its torch twin, torch)
FORBIDDEN = ("numpy_transformer", "reference_torch", "torch")
_NAMES = "{}, {} or {}".format(*FORBIDDEN)

#: modules that look into the running program (or load code) rather than compute: refused by the scan
INTROSPECTION = ("gc", "inspect", "importlib", "ctypes", "runpy", "builtins")

#: attributes that walk the interpreter's frames (the caller's locals: the grader's, in-process)
FRAME_ATTRIBUTES = ("_getframe", "_current_frames", "f_back", "f_locals", "f_globals", "tb_frame")

#: built-in functions that run code made of text
DYNAMIC_CODE = ("exec", "eval", "compile")

#: calls that open, list or run files: refused when their arguments spell a forbidden package's name
FILE_CALLS = ("open", "Path", "read_text", "read_bytes", "run_path", "run_module", "load", "loadtxt",
              "genfromtxt", "fromfile", "listdir", "scandir", "walk", "glob", "iglob")


def message(name):
    """The refusal's text for ``name``: a forbidden module, or what :func:`scan` found (``"gc"``,
    ``"sys._getframe"``, ``"eval"``, ``"open() of a numpy_transformer path"``)."""
    if forbidden(name):
        return (f"imports {name!r}: a drill is NumPy alone, so a submission may not import {_NAMES} "
                "(the grader's reference); write it yourself with numpy")
    return (f"uses {name}: a drill is NumPy alone, so a submission may not reach into the running program or "
            "the library's files (gc, inspect, frames such as sys._getframe, exec/eval/compile, importlib, "
            f"ctypes, runpy, builtins, or opening the files of {FORBIDDEN[0]} or {FORBIDDEN[1]}): those are "
            "ways to find the grader's answer instead of computing it; write it yourself with numpy")


def forbidden(name):
    """True when the module ``name`` is one of :data:`FORBIDDEN` or inside one."""
    root = (name or "").split(".", 1)[0]
    return root in FORBIDDEN


def _introspection(name):
    return (name or "").split(".", 1)[0] in INTROSPECTION


class RefusedImport(ImportError):
    """An import of a forbidden package, at run time."""


def _literal(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _called(fn):
    return fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""


def _spells_forbidden(node):
    """True when a string literal somewhere in ``node`` names a forbidden package (a path to its files)."""
    return any(isinstance(s, str) and any(p in s for p in FORBIDDEN[:2])
               for s in (_literal(n) for n in ast.walk(node)))


def _findings(node):
    """What ``node`` itself uses that a drill may not: a list of names for :func:`message`."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if forbidden(a.name) or _introspection(a.name)]
    if isinstance(node, ast.ImportFrom) and not node.level:
        name = node.module or ""
        return [name] if forbidden(name) or _introspection(name) else []
    if isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRIBUTES:
        return ["sys." + node.attr if node.attr.startswith("_") else f"a frame's .{node.attr}"]
    if isinstance(node, ast.Name) and node.id in DYNAMIC_CODE and isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, ast.Call):
        called = _called(node.func)
        if called in ("__import__", "import_module") and node.args:
            name = _literal(node.args[0]) or ""
            return [name] if forbidden(name) or _introspection(name) else []
        if called in FILE_CALLS and any(_spells_forbidden(a) for a in [*node.args, *node.keywords]):
            return [f"{called}() of a {FORBIDDEN[0]}/{FORBIDDEN[1]} path"]
    return []


def scan(source):
    """``[(line, name)]`` of what ``source`` may not use (see :func:`message`); empty when nothing, or
    when the source does not parse (the grader reports the syntax error itself)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = [(node.lineno, name) for node in ast.walk(tree) for name in _findings(node)]
    return sorted(found)


class RefuseFinder:
    """A ``sys.meta_path`` finder that refuses the forbidden packages (and answers nothing else)."""

    def find_spec(self, name, path=None, target=None):
        if forbidden(name):
            raise RefusedImport(message(name))
        return None


def seal():
    """In the grading child: forget the forbidden packages and refuse to import them again.

    The child never imported them (it loads its helpers by file path), so this removes nothing there;
    ``import numpy_transformer`` (or a lookup in ``sys.modules``) from the submission finds nothing and
    raises :class:`RefusedImport`.
    """
    for name in [n for n in sys.modules if forbidden(n)]:
        del sys.modules[name]
    sys.meta_path.insert(0, RefuseFinder())
