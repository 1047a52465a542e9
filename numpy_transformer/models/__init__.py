"""Whole models, each read top-down: the encoder (:mod:`.encoder`, ``TransformerModel``),
the encoder-decoder (:mod:`.seq2seq`, ``Seq2SeqModel``), GPT (:mod:`.gpt`, its
configuration in :mod:`.gpt_config`) and generation (:mod:`.generation`).
Built from :mod:`numpy_transformer.nn`; nothing here knows about tasks or training.
"""


def __getattr__(name):
    """The submodules, on first use (``nt.models.<submodule>``, as an eager import would give them)."""
    import importlib
    try:
        value = importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
