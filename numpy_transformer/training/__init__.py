"""Training: the configuration (``TrainConfig``), the :class:`~.trainer.Trainer`, the
evaluation loop, the model kinds of ``--model`` (:mod:`.kinds`), the checkpoint
format (:mod:`.checkpoint`, its files and validation), the run log (:mod:`.runlog`).
"""


def __getattr__(name):
    """The submodules, on first use (``nt.training.<submodule>``, as an eager import would give them)."""
    import importlib
    try:
        value = importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
