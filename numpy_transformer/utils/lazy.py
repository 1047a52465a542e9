"""How a package's namespace is filled from its submodules' ``__all__``, never from a hand-kept list.

* :func:`reexport` -- an eager package (``nn``, ``functional``): every public submodule imported, the
  names of its ``__all__`` bound in the package (``nt.nn.Linear``).
* :func:`submodule_getattr`, :func:`names_getattr` -- a lazy package (PEP 562): ``nt.models.gpt``
  imports ``models/gpt.py`` on first use; ``nt.study.gradcheck`` reads the submodules' ``__all__``
  from their source to find the owner and imports only that one.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any, Callable, Iterable


def submodule_getattr(package: str, namespace: dict) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: its submodules on first use, as an eager import gives them.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    namespace : dict
        The package's ``globals()``: an imported submodule is stored there, so the next lookup is plain.

    Returns
    -------
    callable
        ``__getattr__(name)``; a name that is no submodule raises ``AttributeError`` (an import error
        inside an existing submodule propagates as it is).
    """
    def __getattr__(name: str) -> Any:
        try:
            value = importlib.import_module(f".{name}", package)
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        namespace[name] = value
        return value

    __getattr__.__doc__ = f"The submodules of {package}, on first use (as an eager import would give them)."
    return __getattr__


def declared_all(path: str | Path) -> list[str]:
    """The names a source file declares in ``__all__``, read without importing it.

    Parameters
    ----------
    path : str or Path
        A module's source file (a package's ``__init__.py`` for a package).

    Returns
    -------
    list of str
        The strings of every top-level ``__all__ = [...]`` and ``__all__ += [...]`` (lists or tuples of
        string literals), in order; empty when the file declares none or computes its ``__all__``.
    """
    names: list[str] = []
    for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = []
        elif not (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
                  and node.target.id == "__all__"):
            continue
        if isinstance(node.value, (ast.List, ast.Tuple)):
            names += [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names


def public_submodules(paths: Iterable[str], skip: Iterable[str] = ()) -> list[str]:
    """The submodules of a package whose ``__all__`` its namespace re-exports, sorted.

    A submodule is re-exported unless its name starts with ``_`` (a private helper module) or is in
    ``skip`` (a module that is meant to be reached by its own name, such as ``nn.hooks``, whose
    ``forward`` and ``backward`` would mean nothing as ``nn.forward``).

    Parameters
    ----------
    paths : iterable of str
        The package's ``__path__``.
    skip : iterable of str
        Submodule names left out.
    """
    skip = set(skip)
    return sorted(info.name for info in pkgutil.iter_modules(list(paths))
                  if not info.name.startswith("_") and info.name not in skip)


def reexport(package: str, namespace: dict, skip: Iterable[str] = ()) -> list[str]:
    """Import every public submodule of ``package`` and bind the names of its ``__all__`` in ``namespace``.

    This is what ``from .submodule import *`` written once per submodule would do, with the list of
    submodules found rather than kept by hand: a new ``nn/geglu.py`` with ``__all__ = ["GeGLU"]`` is
    ``nt.nn.GeGLU`` with no edit of the package's ``__init__``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    namespace : dict
        The package's ``globals()`` (must hold ``__path__``).
    skip : iterable of str
        Submodules reached by their own name only (see :func:`public_submodules`).

    Returns
    -------
    list of str
        The package's ``__all__``: every re-exported name, in the submodules' order.

    Raises
    ------
    ImportError
        When two submodules declare the same name for different objects, or a declared name is missing
        (one definition per public name).
    """
    names: list[str] = []
    for sub in public_submodules(namespace["__path__"], skip):
        module = importlib.import_module(f".{sub}", package)
        for name in getattr(module, "__all__", ()):
            if not hasattr(module, name):
                raise ImportError(f"{module.__name__}.__all__ names {name!r}, which the module does not define")
            value = getattr(module, name)
            if name in names and namespace[name] is not value:
                raise ImportError(f"{package}: the public name {name!r} is declared by two submodules "
                                  f"({getattr(namespace[name], '__module__', '?')} and {module.__name__}) for "
                                  "different objects; a public name has one definition")
            if name not in names:
                names.append(name)
            namespace[name] = value
    return names


def declared_names(package: str, paths: Iterable[str], skip: Iterable[str] = ()) -> dict[str, str]:
    """``{name: submodule}`` for every name the public submodules of a package declare, without importing them.

    The static twin of :func:`reexport`, for the lazy packages (:func:`names_getattr`): the first
    submodule (sorted) that declares a name owns it. A subpackage's names are those of its
    ``__init__.py``'s literal ``__all__``.
    """
    owners: dict[str, str] = {}
    for sub in public_submodules(paths, skip):
        for root in paths:
            file = Path(root, sub, "__init__.py") if Path(root, sub).is_dir() else Path(root, f"{sub}.py")
            if file.is_file():
                for name in declared_all(file):
                    owners.setdefault(name, f"{package}.{sub}")
                break
    return owners


def names_getattr(package: str, namespace: dict) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a lazy package that also offers its submodules' public names.

    ``package.X`` is, on first use, the submodule ``X`` if there is one, else the name ``X`` from the
    public submodule whose ``__all__`` declares it (read from the source by :func:`declared_names`,
    so nothing is imported until asked for): ``nt.study.gradcheck`` is the function of
    ``study/gradchecking/``. The package's ``__all__`` (computed on first use) lists those names.
    """
    submodule = submodule_getattr(package, namespace)
    owners: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            if not owners:
                owners.update(declared_names(package, namespace["__path__"]))
            namespace["__all__"] = value = list(owners)
            return value
        try:
            return submodule(name)
        except AttributeError:
            if not owners:
                owners.update(declared_names(package, namespace["__path__"]))
            if name not in owners:
                raise
        value = getattr(importlib.import_module(owners[name]), name)
        namespace[name] = value
        return value

    __getattr__.__doc__ = f"The submodules of {package} and their public names, on first use."
    return __getattr__
