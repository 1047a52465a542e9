"""The seeded synthetic tasks and their batching (:mod:`.data`, :mod:`.lm`, :mod:`.seq2seq`)
and the metrics (:mod:`.bleu`).
"""

from ..utils.lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, globals())
