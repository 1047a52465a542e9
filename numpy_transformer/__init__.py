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

#: the tools and whole models offered at the top (``nt.gradcheck``, ``nt.GPT``) -> the module whose ``__all__``
#: declares them (tests/project/test_public_names.py checks that it does); every name of ``nn.__all__`` (found from
#: the files of ``nn/``, see ``nn/__init__.py``) is offered too: ``nt.Linear``, and a new ``nn/<topic>.py``'s names
#: with no edit here
_NAMES = {
    "trace": ".study.trace",
    "gradcheck": ".study.gradchecking", "gradcheck_module": ".study.gradchecking",
    "GradcheckResult": ".study.gradchecking", "GradcheckError": ".study.gradchecking",
    "TransformerModel": ".models.encoder",
    "GPT": ".models.gpt", "GPTConfig": ".models.gpt", "llama_config": ".models.gpt",
    "Seq2SeqModel": ".models.seq2seq",
    "corpus_bleu": ".tasks.bleu",
    "clip_grad_norm_": ".optim.clip",
    "check_against_torch": ".oracle", "check_against_torch_module": ".oracle",
    "CheckpointError": ".training.checkpoint", "CheckpointWriteError": ".training.checkpoint",
    "PretrainedFolderError": ".models.pretrained", "load_tokenizer": ".models.pretrained",
}


def _nn_names():
    """``nn.__all__`` (importing ``nn``: asked for only after the cheaper lookups failed)."""
    return _importlib.import_module(".nn", __name__).__all__


def __getattr__(name):
    if name in _SUBMODULES:
        value = _importlib.import_module(_SUBMODULES[name], __name__)
    elif name in _NAMES:
        value = getattr(_importlib.import_module(_NAMES[name], __name__), name)
    elif name == "__all__":                  # computed on first use: ``from numpy_transformer import *``
        value = [*_SUBMODULES, *_NAMES, *(n for n in _nn_names() if n not in _NAMES)]
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:                                    # any other submodule, as an eager import made them: nt.nn, nt.models
        try:
            value = _importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise                        # the submodule exists but needs something missing: say so
            if name not in _nn_names():      # nt.Linear, nt.GeGLU: a name of nn's
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
            value = getattr(_importlib.import_module(".nn", __name__), name)
    globals()[name] = value                 # the next access is an ordinary attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(__getattr__("__all__")))


if TYPE_CHECKING:                             # what editors and type checkers see
    from . import amp, functional, optim
    from .models import generation
    from .models.encoder import TransformerModel
    from .models.gpt import GPT, GPTConfig, llama_config
    from .models.pretrained import PretrainedFolderError, load_tokenizer
    from .models.seq2seq import Seq2SeqModel
    from .nn import *  # noqa: F401,F403 (nn.__all__, found from its files)
    from .optim.clip import clip_grad_norm_
    from .oracle import check_against_torch, check_against_torch_module
    from .study.gradchecking import GradcheckError, GradcheckResult, gradcheck, gradcheck_module
    from .study.trace import trace
    from .tasks import data
    from .tasks import seq2seq as tasks_seq2seq
    from .tasks.bleu import corpus_bleu
    from .training.checkpoint import CheckpointError, CheckpointWriteError

del TYPE_CHECKING
