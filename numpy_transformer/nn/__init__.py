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

Files (the names in each file's ``__all__`` are re-exported here, found, not listed: ``numpy_transformer.nn.X``
and ``nt.X``; a new ``nn/<topic>.py`` with an ``__all__`` needs no edit here; ``hooks`` and ``recompute`` are
reached by their own name, and ``_*.py`` are private):

* ``module.py`` — :class:`Parameter`, :class:`Module` (registration, ``_save``/``_take``, ``state_dict``,
  the hooks' calls), :class:`ModuleList`, :class:`IncompatibleKeys`.
* ``modes.py`` — :func:`eval_mode` (eval mode for a ``with`` block, each submodule's mode restored).
* ``hooks.py`` — what the modules report (outputs, gradients, attention's intermediates) to whoever
  subscribes in the calling thread (``nt.trace``); the core imports nothing above it.
* ``loss.py`` — :class:`CrossEntropyLoss` (torch's ``nn.CrossEntropyLoss`` over ``F.cross_entropy_*``).
* ``_init.py`` — the dtype check and the torch-matching uniform / Xavier-uniform initialisations.
* ``_layout.py`` — :class:`~numpy_transformer.nn._layout.BatchLayout`: batch-first, sequence-first or
  unbatched inputs in and out of the batch-first layout the modules compute in (written once).
* ``layers.py`` — :class:`Linear`, :class:`Embedding`, :class:`Dropout`, :class:`TokenEmbedding`,
  :class:`PositionalEncoding`, :func:`sinusoidal_table`, :class:`LearnedPositionalEmbedding`.
* ``activations.py`` — :class:`ReLU`, :class:`GELU`, :class:`SiLU`, :func:`activation_module`.
* ``feedforward.py`` — :class:`GatedFeedForward` and its variants, each a subclass (:class:`SwiGLU`,
  :class:`GeGLU` ...): the block's gated ``ffn=`` choices (``block.GATED_FFNS`` finds them).
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

from ..utils.lazy import reexport

#: the submodules reached by their own name (``nn.hooks.forward``, ``nn.recompute.run_layer``), not flattened
NAMESPACES = ("hooks", "recompute")

__all__ = reexport(__name__, globals(), skip=NAMESPACES)
