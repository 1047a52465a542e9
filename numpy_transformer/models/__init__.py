"""Whole models, each read top-down: the encoder (:mod:`.encoder`, ``TransformerModel``),
the encoder-decoder (:mod:`.seq2seq`, ``Seq2SeqModel``), GPT (:mod:`.gpt`, its
configuration in :mod:`.gpt_config`) and generation (:mod:`.generation`).
Built from :mod:`numpy_transformer.nn`; nothing here knows about tasks or training.
"""

from ..utils.lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, globals())
