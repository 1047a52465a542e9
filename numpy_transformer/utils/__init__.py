"""The bottom layer: argument validation (:mod:`.checks`) and text width and wrapping
(:mod:`.text`). Imports nothing of the package.
"""


def __getattr__(name):
    """The submodules, on first use (``nt.utils.<submodule>``, as an eager import would give them)."""
    import importlib
    try:
        value = importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
