"""The seeded synthetic tasks and their batching (:mod:`.data`, :mod:`.lm`, :mod:`.seq2seq`)
and the metrics (:mod:`.bleu`).
"""


def __getattr__(name):
    """The submodules, on first use (``nt.tasks.<submodule>``, as an eager import would give them)."""
    import importlib
    try:
        value = importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
