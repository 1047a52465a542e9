"""The encoder: :class:`TransformerEncoderLayer` (self-attention and feed-forward blocks, each with
residual, dropout and LayerNorm, post-LN or pre-LN) and :class:`TransformerEncoder` (a stack of
copies with its own dropout generators), plus :func:`dropout_masks`, which collects the keep-masks
of the last forward for the torch oracle to replay.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import functional as F
from ..utils.checks import as_generator, check_float_input, check_mask, check_positive_int
from . import hooks
from ._init import dtype_of
from ._layout import BatchLayout
from .activations import activation_module
from .attention import MultiheadAttention
from .kv_cache import cached_attention
from .layers import Dropout, Linear
from .module import Module, ModuleList
from .norms import LayerNorm
from .recompute import backward_layer, run_layer

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "dropout_masks"]


class TransformerEncoderLayer(Module):
    """One encoder block: self-attention and feed-forward, each with residual, dropout and LayerNorm.

    The same construction, state_dict keys and maths as ``torch.nn.TransformerEncoderLayer``::

        norm_first=False (post-LN):  x = norm1(x + sa(x));        x = norm2(x + ff(x))
        norm_first=True  (pre-LN):   x = x + sa(norm1(x));        x = x + ff(norm2(x))
        sa(x) = dropout1(self_attn(x, x, x))
        ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))

    Parameters
    ----------
    d_model : int
        D.
    nhead : int
        H; D must be divisible by H.
    dim_feedforward : int
        F.
    dropout : float
    activation : {"relu", "gelu", "silu"} or an nt.ReLU/nt.GELU/nt.SiLU module
    layer_norm_eps : float
    batch_first : bool
        True (default here): (B, S, D); False: (S, B, D).
    norm_first : bool
    bias : bool
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        Initialisation and every dropout mask derive from it.
    attention : {"standard", "tiled"}
        How self-attention is computed (see :class:`MultiheadAttention`); "tiled" keeps memory linear in S.
    block_size : int
        Tile size of the tiled path.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, dtype=np.float32,
                 seed=None, attention="standard", block_size=128):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(nhead, "nhead")
        if d_model % nhead != 0:
            raise ValueError(f"d_model must be divisible by nhead, got d_model={d_model} and nhead={nhead}")
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        self.d_model = d_model
        self.batch_first = bool(batch_first)
        self.norm_first = bool(norm_first)
        # The attention module always runs batch-first inside the layer; the layer transposes once.
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True,
                                            dtype=self.dtype, seed=rng, attention=attention,
                                            block_size=block_size)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=self.dtype, seed=rng)
        self.dropout = Dropout(dropout, seed=rng.spawn(1)[0])
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=self.dtype, seed=rng)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.dropout1 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.dropout2 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.activation = activation_module(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (B, S, D) (or (S, B, D) when not batch_first; or unbatched (S, D)) -> same shape.

        Masks as torch's modules: ``src_mask`` (S, S) or (B*H, S, S) (unbatched: (S, S) or (H, S, S)),
        bool (True = may NOT attend) or float (added); ``src_key_padding_mask`` (B, S) (unbatched: (S,)),
        True = ignore that key. ``is_causal``: a hint that ``src_mask`` is the causal mask (a wrong hint
        raises ValueError); **difference from torch:** with ``src_mask`` None it applies the causal mask
        (torch raises "Need attn_mask if specifying the is_causal hint").
        """
        bf = "(B, S, D)" if self.batch_first else "(S, B, D)"
        x = check_float_input(src, "src", self.dtype, ndim=(2, 3), last_dim=self.d_model,
                              shape_doc=bf + " or unbatched (S, D)")
        layout = BatchLayout.of(x, self.batch_first)
        h = self.self_attn.num_heads
        if layout.unbatched:             # the masks of one batch element (torch's unbatched shapes)
            s = x.shape[0]
            src_key_padding_mask = check_mask(src_key_padding_mask, "src_key_padding_mask", [(s,)], self.dtype)
            src_key_padding_mask = layout.add_batch(src_key_padding_mask)        # (1, S)
            check_mask(src_mask, "src_mask", [(s, s), (h, s, s)], self.dtype)
        x = layout.to_batch_first(x)                                             # (B, S, D)
        if x.shape[0] == 0 or x.shape[1] == 0:
            raise ValueError(f"src must have a non-empty batch and sequence, got shape {src.shape}")
        if not layout.unbatched:
            check_mask(src_key_padding_mask, "src_key_padding_mask", [x.shape[:2]], self.dtype)
            check_mask(src_mask, "src_mask", [(x.shape[1],) * 2, (x.shape[0] * h,) + (x.shape[1],) * 2],
                       self.dtype)
        F.check_causal_hint(src_mask, is_causal, "src_mask", x.shape[1], x.shape[1])
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        self._save((x.shape, layout))
        return layout.from_batch_first(x)

    def forward_cached(self, x, cache, slot, src_key_padding_mask=None):
        """Inference: the layer on the new positions x (B, S, D) (batch first), causal self-attention
        through ``cache`` (:func:`~numpy_transformer.nn.kv_cache.cached_attention`), pre-LN and post-LN
        alike; ``src_key_padding_mask`` (B, P+S): True = a padded position, never attended to. Nothing
        is saved for a backward."""
        def attend(h):
            return self.dropout1(cached_attention(self.self_attn, h, cache, slot,
                                                  key_padding_mask=src_key_padding_mask))
        if self.norm_first:
            x = x + attend(self.norm1(x))
            return x + self._ff_block(self.norm2(x))                             # (B, S, D)
        x = self.norm1(x + attend(x))
        return self.norm2(x + self._ff_block(x))                                 # (B, S, D)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)          # (B, S, D)
        return self.dropout1(out)

    def _sa_block_backward(self, dout):
        # x fed query, key and value: their three gradients add (summed inside, in one product)
        return self.self_attn.backward(self.dropout1.backward(dout), sum_inputs=True)

    def _ff_block(self, x):
        h = self.dropout(self.activation(self.linear1(x)))                       # (B, S, F)
        return self.dropout2(self.linear2(h))                                    # (B, S, D)

    def _ff_block_backward(self, dout):
        dh = self.linear2.backward(self.dropout2.backward(dout))                 # (B, S, F)
        return self.linear1.backward(self.activation.backward(self.dropout.backward(dh)))  # (B, S, D)

    def backward(self, dout):
        """dout shaped like the output -> d src; accumulates every parameter's gradient.

        A residual ``y = x + f(x)`` passes ``dout`` straight to ``x`` *and* through ``f``: the two
        gradients add. Post-LN goes through each norm's backward first.
        """
        shape, layout = self._take()
        dy = layout.grad_to_batch_first(dout, shape, self.dtype)                 # (B, S, D)
        if self.norm_first:
            dh = dy + self.norm2.backward(self._ff_block_backward(dy))           # through x + ff(norm2(x))
            if hooks.active():
                hooks.residual(self, dh, "between self_attn and feed-forward")
            dx = dh + self.norm1.backward(self._sa_block_backward(dh))           # through x + sa(norm1(x))
        else:
            dh = self.norm2.backward(dy)                                         # y = norm2(h + ff(h))
            dh = dh + self._ff_block_backward(dh)
            if hooks.active():
                hooks.residual(self, dh, "between self_attn and feed-forward")
            dx = self.norm1.backward(dh)                                         # h = norm1(x + sa(x))
            dx = dx + self._sa_block_backward(dx)
        return layout.from_batch_first(dx)


def reseed(module, seed_sequence):
    """Give every generator-holding sub-module a fresh generator spawned from ``seed_sequence``."""
    for m in module.modules():
        if hasattr(m, "rng") and isinstance(m.__dict__.get("rng"), np.random.Generator):
            object.__setattr__(m, "rng", np.random.default_rng(seed_sequence.spawn(1)[0]))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer`` and an optional final norm, as torch.

    Like ``torch.nn.TransformerEncoder``, every layer starts with the *same* weights (copies of the
    template); each copy gets its own dropout generator (spawned from ``seed``) so masks differ
    between layers.

    Parameters
    ----------
    encoder_layer : TransformerEncoderLayer
    num_layers : int
    norm : LayerNorm, optional
    enable_nested_tensor, mask_check : bool
        Accepted for torch compatibility; they only affect torch's fast inference path.
    seed : int or numpy.random.Generator, optional
    checkpoint : bool
        Not in torch (its ``torch.utils.checkpoint`` wraps calls instead): activation checkpointing.
        The forward keeps only each layer's input and drops the layer's caches; the backward runs each
        layer's forward again (same input, same dropout draws) and then its backward, so the gradients
        are the plain path's bit for bit, for one more forward's time and about one layer's caches of
        memory instead of ``num_layers`` (:mod:`numpy_transformer.nn.recompute`). An attribute: set
        ``encoder.checkpoint`` at any time; it applies from the next forward.
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True,
                 seed=None, checkpoint=False):
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"encoder_layer must be an nt.TransformerEncoderLayer, got {type(encoder_layer).__name__}")
        check_positive_int(num_layers, "num_layers")
        ss = np.random.SeedSequence(seed if not isinstance(seed, np.random.Generator)
                                    else int(seed.integers(2**63)))
        layers = []
        for _ in range(num_layers):
            layer = copy.deepcopy(encoder_layer)
            reseed(layer, ss)
            layers.append(layer)
        self.layers = ModuleList(layers)
        self.num_layers = num_layers
        if norm is not None and not isinstance(norm, LayerNorm):
            raise TypeError(f"norm must be an nt.LayerNorm or None, got {type(norm).__name__}")
        self.norm = norm
        self.batch_first = encoder_layer.batch_first
        self.checkpoint = bool(checkpoint)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """src (B, S, D) (or (S, B, D) when not batch_first; or unbatched (S, D)) -> same shape.

        ``mask``, ``src_key_padding_mask``: as :meth:`TransformerEncoderLayer.forward`'s ``src_mask`` and
        ``src_key_padding_mask`` (bool True = may NOT attend; float added). ``is_causal=None`` detects a
        causal ``mask`` (as torch); ``is_causal=True`` is a hint that ``mask`` is the causal mask (a wrong
        hint raises ValueError) and, **unlike torch** (which raises), applies the causal mask when
        ``mask`` is None.
        """
        # Validate here so that the messages name this method's arguments (``mask``, not ``src_mask``).
        layer = self.layers[0]
        bf = "(B, S, D)" if self.batch_first else "(S, B, D)"
        src = check_float_input(src, "src", layer.dtype, ndim=(2, 3), last_dim=layer.d_model,
                                shape_doc=bf + " or unbatched (S, D)")
        h = layer.self_attn.num_heads
        if src.ndim == 2:
            s = src.shape[0]
            check_mask(src_key_padding_mask, "src_key_padding_mask", [(s,)], layer.dtype)
            check_mask(mask, "mask", [(s, s), (h, s, s)], layer.dtype)
        else:
            b, s = (src.shape[0], src.shape[1]) if self.batch_first else (src.shape[1], src.shape[0])
            check_mask(src_key_padding_mask, "src_key_padding_mask", [(b, s)], layer.dtype)
            check_mask(mask, "mask", [(s, s), (b * h, s, s)], layer.dtype)
        F.check_causal_hint(mask, is_causal, "mask", s, s)
        if is_causal is None:
            is_causal = detect_causal_mask(mask)
        x, saved = src, []
        for layer in self.layers:                  # checkpoint: each layer keeps only its input
            x, kept = run_layer(layer, self.checkpoint, x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                                is_causal=is_causal)
            saved.append(kept)
        if self.norm is not None:
            x = self.norm(x)
        self._save(saved)
        return x

    def backward(self, dout):
        """dout (B, S, D) -> d src; accumulates every layer's parameter gradients (a checkpointed
        layer's forward is recomputed first)."""
        saved = self._take()
        if self.norm is not None:
            dout = self.norm.backward(dout)
        for layer, kept in reversed(list(zip(self.layers, saved))):
            dout = backward_layer(layer, kept, dout)
        return dout


def detect_causal_mask(mask):
    """torch's ``_detect_is_causal_mask``: a 2-D (S, S) mask that is the causal mask."""
    if mask is None:
        return False
    mask = np.asarray(mask)
    if mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
        return False
    return F.is_causal_mask(mask, mask.shape[0], mask.shape[0])


def dropout_masks(module):
    """``{module name: keep-mask}`` for every dropout (and attention dropout) that used one in the
    last forward; feed it to ``reference_torch`` to replay the same masks."""
    return {name: m.last_mask for name, m in module.named_modules()
            if getattr(m, "last_mask", None) is not None}
