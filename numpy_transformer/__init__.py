"""numpy-transformer: Transformers (encoder, decoder, GPT) in pure NumPy, every layer with a
hand-written backward.

The modules mirror ``torch.nn`` (names, arguments, defaults, masks, ``state_dict`` keys); the
functional core (:mod:`numpy_transformer.functional`) holds each op as a forward/backward pair.

Every public name below is imported on first use (PEP 562's module ``__getattr__``), as NumPy and
SciPy do for their submodules: ``import numpy_transformer`` stays quick, and a command such as
``drill check`` loads only the parts it uses. ``nt.Linear``, ``nt.nn.Linear`` (any submodule),
``from numpy_transformer import GPT`` and ``from numpy_transformer import *`` work as with eager
imports.
"""

import importlib as _importlib
import sys as _sys
import types as _types

TYPE_CHECKING = False      # typing.TYPE_CHECKING without importing typing (milliseconds at start-up, before
                           # ``python -m numpy_transformer`` can handle Ctrl-C); type checkers take it as true


class _Package(_types.ModuleType):
    """This package's module type, for one name: ``nt.gradcheck`` is the function, imported on first use
    like every other name (so that ``python -m numpy_transformer`` reaches its Ctrl-C handling before
    NumPy loads). The function shares its name with the subpackage that defines it, and importing a
    subpackage (whoever does it) sets that attribute of the package to the subpackage; the property's
    setter ignores exactly that, so ``nt.gradcheck`` stays the function. Any other value set (a test's
    monkeypatch) is kept, as for a plain attribute."""

    @property
    def gradcheck(self):
        if "gradcheck" in self.__dict__:
            return self.__dict__["gradcheck"]
        return _importlib.import_module(".gradcheck", __name__).gradcheck

    @gradcheck.setter
    def gradcheck(self, value):
        if not (isinstance(value, _types.ModuleType) and value.__name__ == f"{__name__}.gradcheck"):
            self.__dict__["gradcheck"] = value

    @gradcheck.deleter
    def gradcheck(self):
        self.__dict__.pop("gradcheck", None)


_sys.modules[__name__].__class__ = _Package

__version__ = "0.1.0"

#: the public submodules
_SUBMODULES = ("functional", "data", "optim", "generation", "tasks_seq2seq", "amp")

#: every other public name -> the module that defines it
_NAMES = {
    "trace": "._trace",
    "CrossEntropyLoss": ".loss",
    "TransformerModel": ".model",
    "GPT": ".gpt", "GPTConfig": ".gpt", "llama_config": ".gpt",
    "Seq2SeqModel": ".seq2seq_model",
    "corpus_bleu": ".bleu",
    "clip_grad_norm_": ".optim",
    "check_against_torch": ".oracle", "check_against_torch_module": ".oracle",
    "CheckpointError": ".checkpoint", "CheckpointWriteError": ".checkpoint",
    "gradcheck_module": ".gradcheck", "GradcheckResult": ".gradcheck", "GradcheckError": ".gradcheck",
}
_NAMES.update(dict.fromkeys([
    "GELU", "Dropout", "Embedding", "LayerNorm", "Linear", "Module", "ModuleList", "MultiheadAttention",
    "Parameter", "PositionalEncoding", "ReLU", "RMSNorm", "TokenEmbedding", "TransformerEncoder",
    "TransformerEncoderLayer", "dropout_masks", "sinusoidal_table",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
    "LearnedPositionalEmbedding", "SiLU", "SwiGLU", "KVCache",
    "FeedForward", "GroupedQueryAttention", "TransformerBlock", "RotaryEmbedding", "RelativePositionBias",
], ".nn"))

__all__ = [*_SUBMODULES, *_NAMES, "gradcheck"]


def __getattr__(name):
    if name in _SUBMODULES:
        value = _importlib.import_module(f".{name}", __name__)
    elif name in _NAMES:
        value = getattr(_importlib.import_module(_NAMES[name], __name__), name)
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:                                    # any other submodule, as an eager import made them: nt.nn, nt.gpt
        try:
            value = _importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise                        # the submodule exists but needs something missing: say so
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value                 # the next access is an ordinary attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:                            # what editors and type checkers see
    from . import amp, data, functional, generation, optim, tasks_seq2seq
    from ._trace import trace
    from .bleu import corpus_bleu
    from .checkpoint import CheckpointError, CheckpointWriteError
    from .gpt import GPT, GPTConfig, llama_config
    from .gradcheck import GradcheckError, GradcheckResult, gradcheck, gradcheck_module
    from .loss import CrossEntropyLoss
    from .model import TransformerModel
    from .nn import (GELU, Dropout, Embedding, FeedForward, GroupedQueryAttention, KVCache, LayerNorm,
                     LearnedPositionalEmbedding, Linear, Module, ModuleList, MultiheadAttention, Parameter,
                     PositionalEncoding, RelativePositionBias, ReLU, RMSNorm, RotaryEmbedding, SiLU, SwiGLU,
                     TokenEmbedding, Transformer, TransformerBlock, TransformerDecoder, TransformerDecoderLayer,
                     TransformerEncoder, TransformerEncoderLayer, dropout_masks, sinusoidal_table)
    from .optim import clip_grad_norm_
    from .oracle import check_against_torch, check_against_torch_module
    from .seq2seq_model import Seq2SeqModel

del TYPE_CHECKING
