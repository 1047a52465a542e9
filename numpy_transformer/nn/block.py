"""A configurable transformer block for the modern options: :class:`TransformerBlock` (LayerNorm or
RMSNorm, pre- or post-LN, :class:`GroupedQueryAttention` with rotary positions and an additive bias,
a ReLU/GELU/SiLU feed-forward or SwiGLU) and :class:`FeedForward`.

The seed design's block stays :class:`TransformerEncoderLayer` (torch's own module, keys and maths);
this one is what the models build when an option torch's layer does not have is asked for
(``GPTConfig(positions="rope", norm="rmsnorm", ffn="swiglu", n_kv_head=...)``, the encoder model's
``pos_encoding="relative"|"alibi"``). Shapes: B batch, S positions, D width, F feed-forward width::

    norm_first=True  (pre-LN):   x = x + drop1(attn(norm1(x)));   x = x + drop2(mlp(norm2(x)))
    norm_first=False (post-LN):  x = norm1(x + drop1(attn(x)));   x = norm2(x + drop2(mlp(x)))

``state_dict`` keys: ``norm1.*``, ``self_attn.{q,k,v,o}_proj.*``, ``norm2.*``, and ``mlp.linear1.*``,
``mlp.linear2.*`` (ReLU/GELU/SiLU, torch's encoder-layer names) or ``mlp.{gate,up,down}_proj.*``
(SwiGLU, Llama's names).
"""

from __future__ import annotations

import numpy as np

from ..utils.checks import as_generator, check_float_input, check_grad, check_positive_int
from . import feedforward, hooks
from ._init import dtype_of
from .activations import ACTIVATIONS, activation_module
from .gqa import GroupedQueryAttention
from .layers import Dropout, Linear
from .module import Module
from .norms import LayerNorm, RMSNorm

__all__ = ["FeedForward", "TransformerBlock", "FFNS", "GATED_FFNS", "NORMS", "make_feedforward", "make_norm"]

# The vocabularies of ``ffn=`` and ``norm=``, each defined once, here; the models (GPTConfig), the
# training configuration, the model kinds and the CLI derive their choices and messages from them.
#: gated feed-forwards by name: ``down_proj(act(gate_proj(x)) * up_proj(x))``, built as
#: ``cls(d_model, dim_feedforward, bias=, dtype=, seed=)``: every subclass of ``GatedFeedForward`` in
#: nn/feedforward.py, found by its ``ffn`` name (a new gated kind is one subclass there, no entry here)
GATED_FFNS = {cls.ffn: cls for cls in feedforward.GatedFeedForward.__subclasses__()}
#: every ``ffn``: an MLP with one of the activations (:class:`FeedForward`), or a gated one
FFNS = (*ACTIVATIONS, *GATED_FFNS)
#: the norms by name (``norm=``)
NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


class FeedForward(Module):
    """``linear2(dropout(activation(linear1(x))))``: torch's encoder layer's feed-forward as a module.

    Parameters
    ----------
    d_model, dim_feedforward : int
        D and F.
    activation : {"relu", "gelu", "silu"}
    dropout : float
        After the activation.
    bias : bool
    dtype, seed : as :class:`~numpy_transformer.nn.Linear`
    """

    def __init__(self, d_model, dim_feedforward, activation="relu", dropout=0.0, bias=True, dtype=np.float32,
                 seed=None):
        super().__init__()
        rng = as_generator(seed)
        self.dtype = dtype_of(dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=self.dtype, seed=rng)
        self.activation = activation_module(activation)
        self.dropout = Dropout(dropout, seed=rng.spawn(1)[0])
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=self.dtype, seed=rng)

    def forward(self, x):
        """x (..., D) -> (..., D)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))      # (..., F) inside

    def backward(self, dout):
        """dout (..., D) -> dx (..., D): the four steps in reverse."""
        dh = self.dropout.backward(self.linear2.backward(dout))                  # (..., F)
        return self.linear1.backward(self.activation.backward(dh))               # (..., D)


def make_feedforward(d_model, dim_feedforward, ffn, dropout=0.0, bias=True, dtype=np.float32, seed=None):
    """The feed-forward ``ffn`` names (one of :data:`FFNS`): a gated one of :data:`GATED_FFNS` (no
    dropout inside), else a :class:`FeedForward` with that activation."""
    if ffn in GATED_FFNS:
        return GATED_FFNS[ffn](d_model, dim_feedforward, bias=bias, dtype=dtype, seed=seed)
    return FeedForward(d_model, dim_feedforward, activation=ffn, dropout=dropout, bias=bias, dtype=dtype, seed=seed)


def make_norm(norm, d_model, eps=1e-5, bias=True, dtype=np.float32):
    """The norm ``norm`` names (one of :data:`NORMS`) over the last axis of width ``d_model``; ``bias``
    is LayerNorm's (RMSNorm has none)."""
    if norm == "rmsnorm":
        return RMSNorm(d_model, eps=eps, dtype=dtype)
    return LayerNorm(d_model, eps=eps, bias=bias, dtype=dtype)


class TransformerBlock(Module):
    """One transformer block with the modern options (see the module docstring for the maths).

    Parameters
    ----------
    d_model, nhead, dim_feedforward : int
        D, H and F.
    num_kv_heads : int, optional
        Key/value heads (default H; 1: multi-query attention).
    dropout : float
        On the attention probabilities, both residual branches and (not a gated one) inside the feed-forward.
    ffn : str
        One of :data:`FFNS`: an activation of ``nn.activations.ACTIVATIONS`` ("relu", "gelu", "silu": a
        :class:`FeedForward`), or a gated feed-forward of :data:`GATED_FFNS` ("swiglu" ...).
    norm : {"layernorm", "rmsnorm"}
    norm_first : bool
        Pre-LN (True) or post-LN.
    bias : bool
        Biases in every projection and (LayerNorm) the norms.
    layer_norm_eps : float
    rope : bool
        Rotary positions on q and k; ``rope_base``, ``rope_interleaved`` as
        :func:`numpy_transformer.functional.rope_forward`.
    dtype, seed : as :class:`~numpy_transformer.nn.Linear`
    """

    def __init__(self, d_model, nhead, dim_feedforward, num_kv_heads=None, dropout=0.0, ffn="gelu",
                 norm="layernorm", norm_first=True, bias=True, layer_norm_eps=1e-5, rope=False, rope_base=10000.0,
                 rope_interleaved=False, dtype=np.float32, seed=None):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        if ffn not in FFNS:
            raise ValueError(f"ffn must be one of {FFNS}, got {ffn!r}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {tuple(NORMS)}, got {norm!r}")
        self.dtype = dtype_of(dtype)
        self.norm_first, self.ffn, self.norm = bool(norm_first), ffn, norm
        rng = as_generator(seed)
        self.self_attn = GroupedQueryAttention(d_model, nhead, num_kv_heads, bias=bias, dropout=dropout, rope=rope,
                                               rope_base=rope_base, rope_interleaved=rope_interleaved,
                                               dtype=self.dtype, seed=rng)
        self.mlp = make_feedforward(d_model, dim_feedforward, ffn, dropout, bias, self.dtype, rng)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps, bias, self.dtype)
        self.norm2 = make_norm(norm, d_model, layer_norm_eps, bias, self.dtype)
        self.dropout1 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.dropout2 = Dropout(dropout, seed=rng.spawn(1)[0])

    def forward(self, x, attn_bias=None, is_causal=False, attn_mask=None, positions=None):
        """x (B, S, D) -> (B, S, D); the arguments after x as :meth:`GroupedQueryAttention.forward`."""
        x = check_float_input(x, "x", self.dtype, ndim=3, last_dim=self.d_model, shape_doc="(B, S, D)")
        kw = dict(attn_bias=attn_bias, is_causal=is_causal, attn_mask=attn_mask, positions=positions)
        if self.norm_first:
            x = x + self.dropout1(self.self_attn(self.norm1(x), **kw))
            x = x + self.dropout2(self.mlp(self.norm2(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, **kw)))
            x = self.norm2(x + self.dropout2(self.mlp(x)))
        self._save((attn_bias is not None, x.shape))
        return x                                                                 # (B, S, D)

    def backward(self, dout):
        """dout (B, S, D) -> dx (B, S, D), or ``(dx, dattn_bias)`` when the forward had an ``attn_bias``.

        Each residual ``y = x + f(x)`` passes its gradient through twice: ``dx = dy + f'(x)^T dy``.
        Post-LN puts the norm's backward before that split.
        """
        has_bias, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        if self.norm_first:
            dx = dout + self.norm2.backward(self.mlp.backward(self.dropout2.backward(dout)))
            if hooks.active():
                hooks.residual(self, dx, "between self_attn and mlp")
            da = self.self_attn.backward(self.dropout1.backward(dx))
            da, dbias = da if has_bias else (da, None)
            dx = dx + self.norm1.backward(da)
        else:
            dh = self.norm2.backward(dout)
            dh = dh + self.mlp.backward(self.dropout2.backward(dh))
            if hooks.active():
                hooks.residual(self, dh, "between self_attn and mlp")
            dh = self.norm1.backward(dh)
            da = self.self_attn.backward(self.dropout1.backward(dh))
            da, dbias = da if has_bias else (da, None)
            dx = dh + da
        return (dx, dbias) if has_bias else dx

    def forward_cached(self, x, cache, slot, attn_bias=None, attn_mask=None, positions=None):
        """Inference: the block on the new positions x (B, S, D), causal self-attention through ``cache``
        (:meth:`GroupedQueryAttention.forward_cached`). Pre-LN and post-LN alike."""
        kw = dict(attn_bias=attn_bias, attn_mask=attn_mask, positions=positions)
        if self.norm_first:
            x = x + self.dropout1(self.self_attn.forward_cached(self.norm1(x), cache, slot, **kw))
            return x + self.dropout2(self.mlp(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn.forward_cached(x, cache, slot, **kw)))
        return self.norm2(x + self.dropout2(self.mlp(x)))
