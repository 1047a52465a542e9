"""Lazy submodules of a layer's package (PEP 562): ``nt.models.gpt`` imports ``models/gpt.py`` on first use."""

from __future__ import annotations

import importlib
from typing import Any, Callable


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
