"""The PyTorch oracle for ``numpy_transformer``: readable twins of its modules (autograd gradients),
weight/gradient/dropout-mask conversion, and the checker ``python -m reference_torch.check``.

Laid out as the library: ``nn/`` and ``models/`` hold the twins, file for file
(``reference_torch/nn/attention.py`` twins ``numpy_transformer/nn/attention.py``,
``reference_torch/models/gpt.py`` twins ``numpy_transformer/models/gpt.py``); ``convert`` moves weights,
gradients and masks (a leaf: it imports nothing of this package); ``table`` is the torch side of the
registry's cases (``numpy_transformer.testing``); ``lockstep`` trains a twin beside a Trainer;
``check/`` compares (the checker, ``nt.check_against_torch``, the demo's comparison);
``drill_oracle`` answers the drills.

Needs torch; ``numpy_transformer`` itself never imports this package (only lazily, through
:mod:`numpy_transformer.oracle`, where a CLI offers it).
"""

import sys as _sys

# ``python -m reference_torch.check`` is starting: Ctrl-C while it loads (torch takes seconds) is one line
# and status 130; check/__main__.py restores Ctrl-C's KeyboardInterrupt for the run
if _sys.argv[:1] == ["-m"]:
    import signal as _signal

    def _interrupted_while_starting_up(signum, frame):
        print("interrupted while starting up, nothing done", file=_sys.stderr)
        _sys.exit(130)
    _signal.signal(_signal.SIGINT, _interrupted_while_starting_up)

try:
    import torch as _torch  # noqa: F401  (everything here needs it)
except ImportError as _exc:
    from numpy_transformer.oracle import torch_missing_error
    if _sys.argv[:1] == ["-m"]:    # ``python -m reference_torch.check`` is starting: one line, not runpy's wrapper
        _argv = getattr(_sys, "orig_argv", [])
        _what = _argv[_argv.index("-m") + 1] if "-m" in _argv[:-1] else __name__
        _sys.exit(f"error: {torch_missing_error('python -m ' + _what)}")
    raise torch_missing_error("reference_torch", name=__name__) from _exc

from .convert import from_torch, grads_to_numpy, masks_to_torch, state_dict_to_numpy, state_dict_to_torch, to_torch
from .nn.activations import activation
from .nn.attention import MultiheadAttention, attention, merge_masks
from .nn.block import FeedForward
from .nn.decoder import TransformerDecoder, TransformerDecoderLayer
from .nn.layers import Dropout, PositionalEncoding, TokenEmbedding
from .nn.module import ReferenceModule, clear_dropout_masks, set_dropout_masks
from .nn.seq2seq import Transformer
from .nn.transformer import TransformerEncoder, TransformerEncoderLayer
from .table import twin

__all__ = [
    "Dropout", "FeedForward", "MultiheadAttention", "PositionalEncoding", "ReferenceModule", "TokenEmbedding",
    "TransformerEncoder", "TransformerEncoderLayer", "activation", "attention", "clear_dropout_masks", "merge_masks",
    "set_dropout_masks",
    "from_torch", "grads_to_numpy", "masks_to_torch", "state_dict_to_numpy", "state_dict_to_torch", "to_torch",
    "twin",
]
__all__ += ["Transformer", "TransformerDecoder", "TransformerDecoderLayer"]
