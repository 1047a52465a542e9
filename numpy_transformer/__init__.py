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
TYPE_CHECKING = False      # typing.TYPE_CHECKING without importing typing (milliseconds at start-up, before
                           # ``python -m numpy_transformer`` can handle Ctrl-C); type checkers take it as true

__version__ = "0.1.0"

#: the public submodules -> where they live (``nt.data``, ``nt.generation`` and ``nt.tasks_seq2seq`` keep
#: their names of before the layered layout: they are ``tasks.data``, ``models.generation``, ``tasks.seq2seq``)
_SUBMODULES = {"functional": ".functional", "data": ".tasks.data", "optim": ".optim",
               "generation": ".models.generation", "tasks_seq2seq": ".tasks.seq2seq", "amp": ".amp"}

#: every other public name -> the module that defines it
_NAMES = {
    "trace": ".study.trace",
    "gradcheck": ".study.gradcheck", "gradcheck_module": ".study.gradcheck", "GradcheckResult": ".study.gradcheck",
    "GradcheckError": ".study.gradcheck",
    "TransformerModel": ".models.encoder",
    "GPT": ".models.gpt", "GPTConfig": ".models.gpt", "llama_config": ".models.gpt",
    "Seq2SeqModel": ".models.seq2seq",
    "corpus_bleu": ".tasks.bleu",
    "clip_grad_norm_": ".optim",
    "check_against_torch": ".oracle", "check_against_torch_module": ".oracle",
    "CheckpointError": ".training.checkpoint", "CheckpointWriteError": ".training.checkpoint",
}
_NAMES.update(dict.fromkeys([
    "GELU", "Dropout", "Embedding", "LayerNorm", "Linear", "Module", "ModuleList", "MultiheadAttention",
    "Parameter", "PositionalEncoding", "ReLU", "RMSNorm", "TokenEmbedding", "TransformerEncoder",
    "TransformerEncoderLayer", "dropout_masks", "sinusoidal_table",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
    "LearnedPositionalEmbedding", "SiLU", "SwiGLU", "KVCache", "CrossEntropyLoss",
    "FeedForward", "GroupedQueryAttention", "TransformerBlock", "RotaryEmbedding", "RelativePositionBias",
    "eval_mode",
], ".nn"))

__all__ = [*_SUBMODULES, *_NAMES]


def __getattr__(name):
    if name in _SUBMODULES:
        value = _importlib.import_module(_SUBMODULES[name], __name__)
    elif name in _NAMES:
        value = getattr(_importlib.import_module(_NAMES[name], __name__), name)
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:                                    # any other submodule, as an eager import made them: nt.nn, nt.models
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


if TYPE_CHECKING:                             # what editors and type checkers see
    from . import amp, functional, optim
    from .tasks import data, seq2seq as tasks_seq2seq
    from .models import generation
    from .study.gradcheck import GradcheckError, GradcheckResult, gradcheck, gradcheck_module
    from .study.trace import trace
    from .tasks.bleu import corpus_bleu
    from .training.checkpoint import CheckpointError, CheckpointWriteError
    from .models.gpt import GPT, GPTConfig, llama_config
    from .models.encoder import TransformerModel
    from .nn import (GELU, CrossEntropyLoss, Dropout, Embedding, FeedForward, GroupedQueryAttention, KVCache, LayerNorm,
                     LearnedPositionalEmbedding, Linear, Module, ModuleList, MultiheadAttention, Parameter,
                     PositionalEncoding, RelativePositionBias, ReLU, RMSNorm, RotaryEmbedding, SiLU, SwiGLU,
                     TokenEmbedding, Transformer, TransformerBlock, TransformerDecoder, TransformerDecoderLayer,
                     TransformerEncoder, TransformerEncoderLayer, dropout_masks, eval_mode, sinusoidal_table)
    from .optim import clip_grad_norm_
    from .oracle import check_against_torch, check_against_torch_module
    from .models.seq2seq import Seq2SeqModel

del TYPE_CHECKING
