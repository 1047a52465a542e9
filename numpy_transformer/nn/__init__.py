"""Modules shaped like ``torch.nn``: same class names, constructor arguments, defaults, mask semantics
and ``state_dict`` keys, so weights move between the two with no renaming.

Every module has ``forward`` (also via ``__call__``) and ``backward(dout)``. ``backward`` uses the cache
of the *last* forward, returns the gradient of the input(s) and *adds* every parameter's gradient into
``p.grad`` (accumulation, as torch). A forward's cache is released by its backward, so ``backward``
before ``forward``, or more times than ``forward``, raises ``RuntimeError``. A module used several
times in one forward pass (shared, as torch allows) keeps one cache per use; its backwards consume
them most recent first (see ``module.py``). Every input is validated before
anything changes: a refused call (TypeError, ValueError, IndexError with a message naming the argument,
what was expected and what was received) leaves the module usable, and a ``backward`` refused for a
gradient of the wrong shape or dtype keeps the forward's cache for the next, correct call.

Shape letters: B batch, S sequence (query) length, T key length, D d_model, H heads, Dh = D/H,
F dim_feedforward, V vocabulary.

Files (everything is re-exported here, so ``numpy_transformer.nn.X`` and ``nt.X`` keep working):

* ``module.py`` — :class:`Parameter`, :class:`Module` (registration, ``_save``/``_take``, ``state_dict``,
  the hooks' calls), :class:`ModuleList`, :class:`IncompatibleKeys`.
* ``modes.py`` — :func:`eval_mode` (eval mode for a ``with`` block, each submodule's mode restored).
* ``hooks.py`` — what the modules report (outputs, gradients, attention's intermediates) to whoever
  subscribes in the calling thread (``nt.trace``); the core imports nothing above it.
* ``loss.py`` — :class:`CrossEntropyLoss` (torch's ``nn.CrossEntropyLoss`` over ``F.cross_entropy_*``).
* ``_init.py`` — the dtype check and the torch-matching uniform / Xavier-uniform initialisations.
* ``layers.py`` — :class:`Linear`, :class:`Embedding`, :class:`Dropout`, :class:`TokenEmbedding`,
  :class:`PositionalEncoding`, :func:`sinusoidal_table`, :class:`LearnedPositionalEmbedding`.
* ``activations.py`` — :class:`ReLU`, :class:`GELU`, :class:`SiLU`, :func:`activation_module`.
* ``feedforward.py`` — :class:`SwiGLU` (the gated feed-forward).
* ``norms.py`` — :class:`LayerNorm`, :class:`RMSNorm`.
* ``attention.py`` — :class:`MultiheadAttention`.
* ``rotary.py`` — :class:`RotaryEmbedding` (rotary position embeddings, no parameters).
* ``kv_cache.py`` — :class:`KVCache`, :func:`cached_attention` (incremental decoding, inference only).
* ``transformer.py`` — :class:`TransformerEncoderLayer`, :class:`TransformerEncoder`, :func:`dropout_masks`.
* ``decoder.py`` — :class:`TransformerDecoderLayer`, :class:`TransformerDecoder`.
* ``seq2seq.py`` — :class:`Transformer` (the encoder-decoder).
* ``gqa.py`` — :class:`GroupedQueryAttention` (q/k/v/o projections, grouped key/value heads, rotary
  positions, an additive bias on the scores).
* ``block.py`` — :class:`TransformerBlock` (the modern options: RMSNorm, rotary, SwiGLU, GQA, a bias),
  :class:`FeedForward`.
* ``position_bias.py`` — :class:`RelativePositionBias` (T5's learned, bucketed attention bias).
* ``recompute.py`` — activation checkpointing (``checkpoint=True`` on the stacks and models):
  :func:`~numpy_transformer.nn.recompute.run_layer`, :func:`~numpy_transformer.nn.recompute.backward_layer`.
"""

from .activations import GELU, ReLU, SiLU, activation_module
from .attention import MultiheadAttention
from .block import FeedForward, TransformerBlock
from .decoder import TransformerDecoder, TransformerDecoderLayer
from .gqa import GroupedQueryAttention
from .feedforward import SwiGLU
from .kv_cache import KVCache, cached_attention
from .loss import CrossEntropyLoss
from .layers import (Dropout, Embedding, LearnedPositionalEmbedding, Linear, PositionalEncoding, TokenEmbedding,
                     sinusoidal_table)
from .module import IncompatibleKeys, Module, ModuleList, Parameter
from .modes import eval_mode
from .norms import LayerNorm, RMSNorm
from .rotary import RotaryEmbedding
from .position_bias import RelativePositionBias
from .seq2seq import Transformer
from .transformer import TransformerEncoder, TransformerEncoderLayer, dropout_masks

__all__ = [
    "Parameter", "Module", "ModuleList", "Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "ReLU", "GELU",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TokenEmbedding",
    "PositionalEncoding", "dropout_masks", "IncompatibleKeys", "KVCache", "cached_attention",
]
__all__ += ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
__all__ += ["GroupedQueryAttention", "TransformerBlock", "FeedForward"]
__all__ += ["RotaryEmbedding"]
__all__ += ["RelativePositionBias"]
__all__ += ["SiLU", "SwiGLU", "LearnedPositionalEmbedding"]
__all__ += ["CrossEntropyLoss"]
__all__ += ["eval_mode"]
