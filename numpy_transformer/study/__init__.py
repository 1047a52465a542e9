"""The study tools: the trace (:mod:`.trace`, subscribed to the hooks of
:mod:`numpy_transformer.nn.hooks`), the finite-difference gradient check
(:mod:`.gradcheck`), attention maps and plots, the ablation, the mixed-precision study.
"""


def __getattr__(name):
    """The submodules, on first use (``nt.study.<submodule>``, as an eager import would give them)."""
    import importlib
    try:
        value = importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
