"""Today's decoder attention: :class:`GroupedQueryAttention`, with separate q/k/v/o projections (Hugging
Face Llama's names), fewer key/value heads than query heads (grouped-query; one: multi-query), optional
rotary positions on q and k, and an optional additive bias on the scores (ALiBi, T5's relative bias).

Shapes: B batch, S queries, T keys, D model width, H query heads, Hkv key/value heads, Dh = D / H::

    q = rope(split(q_proj(x)))                 # (B, H, S, Dh)      rotated at each query's position
    k = rope(split(k_proj(x)))                 # (B, Hkv, T, Dh)    rotated at each key's position
    v = split(v_proj(x))                       # (B, Hkv, T, Dh)    (v is never rotated)
    ctx = sdpa(q, k, v, bias + causal, enable_gqa=True)   # query head h reads kv head h // (H / Hkv)
    out = o_proj(merge(ctx))                   # (B, S, D)

torch.nn has no such module; :mod:`reference_torch.nn.gqa` holds its torch twin (autograd for the
gradients), compared in ``tests/nn/test_block.py``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Union

import numpy as np

from .. import functional as F
from ..utils.checks import as_generator, check_float_input, check_grad, check_positive_int, check_probability
from . import hooks
from ._init import dtype_of
from .layers import Linear
from .module import Module

__all__ = ["GroupedQueryAttention"]


def _causal_bias(s, t, offset, dtype):
    """(S, T) additive causal mask for queries at absolute positions offset..offset+S-1 over keys 0..T-1:
    0 where key j <= query position, -inf above (bottom-right aligned when offset = T - S)."""
    i = np.arange(s)[:, None] + offset
    return np.where(np.arange(t)[None, :] > i, -np.inf, 0.0).astype(dtype)        # (S, T)


class _Saved(NamedTuple):
    """What a forward keeps for its backward (read by name)."""
    attn: F.attention.AttentionCache    # the sdpa cache of the rotated heads
    rope_q: Optional[F.rope.RopeCache]  # q's and k's rotations (None without rotary positions)
    rope_k: Optional[F.rope.RopeCache]
    bias_shape: Union[tuple, bool]      # attn_bias's shape; False when the forward had none
    shape: tuple                        # x's shape (B, S, D)


class GroupedQueryAttention(Module):
    """Multi-head self-attention with grouped key/value heads, rotary positions and an additive bias.

    Parameters
    ----------
    embed_dim : int
        D.
    num_heads : int
        H query heads; D divisible by H.
    num_kv_heads : int, optional
        Hkv key/value heads (default H: ordinary multi-head attention; 1: multi-query attention). H must
        be a multiple of Hkv; query head h uses key/value head h // (H / Hkv), as torch's
        ``scaled_dot_product_attention(..., enable_gqa=True)`` (``repeat_interleave``).
    bias : bool
        Biases in the four projections (Llama: none).
    dropout : float
        On the attention probabilities.
    rope : bool
        Rotate q and k by their positions (:func:`numpy_transformer.functional.rope_forward`).
    rope_base : float
    rope_interleaved : bool
        False: the pairs (i, i + Dh/2) (GPT-NeoX, HF Llama); True: the pairs (2i, 2i+1) (the paper).
    dtype, seed : as :class:`~numpy_transformer.nn.Linear`

    ``state_dict`` keys: ``q_proj.weight`` (H*Dh, D), ``k_proj.weight`` (Hkv*Dh, D), ``v_proj.weight``
    (Hkv*Dh, D), ``o_proj.weight`` (D, H*Dh), and the four ``.bias`` with ``bias=True``.
    """

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, bias=False, dropout=0.0, rope=False,
                 rope_base=10000.0, rope_interleaved=False, dtype=np.float32, seed=None):
        super().__init__()
        self.embed_dim = check_positive_int(embed_dim, "embed_dim")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        self.num_kv_heads = num_heads if num_kv_heads is None else check_positive_int(num_kv_heads, "num_kv_heads")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim must be divisible by num_heads, got {embed_dim} and {num_heads}")
        if num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads must be a multiple of num_kv_heads, got num_heads={num_heads} and "
                             f"num_kv_heads={self.num_kv_heads}")
        self.head_dim = embed_dim // num_heads
        if rope and self.head_dim % 2:
            raise ValueError(f"rope needs an even head dimension, got embed_dim/num_heads = {self.head_dim}")
        self.dropout = check_probability(dropout, "dropout")
        self.rope, self.rope_base, self.rope_interleaved = bool(rope), float(rope_base), bool(rope_interleaved)
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        kv = self.num_kv_heads * self.head_dim
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=self.dtype, seed=rng)
        self.k_proj = Linear(embed_dim, kv, bias=bias, dtype=self.dtype, seed=rng)
        self.v_proj = Linear(embed_dim, kv, bias=bias, dtype=self.dtype, seed=rng)
        self.o_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=self.dtype, seed=rng)
        self.rng = rng.spawn(1)[0]                       # the attention dropout's masks
        self.last_mask = None
        self.last_weights = None                         # the last forward's softmax, per head (B, H, S, S)

    def _mask(self, s, t, offset, attn_bias, is_causal, attn_mask):
        """The additive mask of the scores: bias + causal (-inf) + padding (-inf); None when none."""
        parts = []
        if attn_bias is not None:
            parts.append(np.asarray(attn_bias, dtype=self.dtype))                # (H, S, T) or (B, H, S, T)
        if is_causal:
            parts.append(_causal_bias(s, t, offset, self.dtype))                 # (S, T)
        if attn_mask is not None:
            parts.append(np.asarray(attn_mask, dtype=self.dtype))                # additive, broadcastable
        if not parts:
            return None
        mask = parts[0]
        for p in parts[1:]:
            mask = mask + p
        return mask

    def _rotate(self, x, positions):
        """x (B, heads, S, Dh) rotated at ``positions`` (S,), or (B, S) per row (left padding)."""
        if not self.rope:
            return x, None
        if positions is not None and np.ndim(positions) == 2:
            positions = np.asarray(positions)[:, None, :]                        # (B, 1, S): every head
        return F.rope_forward(x, positions=positions, base=self.rope_base, interleaved=self.rope_interleaved)

    def forward(self, x, attn_bias=None, is_causal=False, attn_mask=None, positions=None):
        """x (B, S, D) -> (B, S, D).

        ``attn_bias`` (H, S, S) or (B, H, S, S): added to the scaled scores (its gradient is returned by
        :meth:`backward`). ``is_causal``: key j > query i masked. ``attn_mask``: an additive float mask
        broadcastable to (B, H, S, S) (e.g. -inf at padded keys), treated as a constant. ``positions``
        (S,) or (B, S) int: the rotary positions (default 0..S-1).
        """
        x = check_float_input(x, "x", self.dtype, ndim=3, last_dim=self.embed_dim, shape_doc="(B, S, D)")
        b, s, _ = x.shape
        h, hkv = self.num_heads, self.num_kv_heads
        if attn_bias is not None and np.shape(attn_bias)[-3:] != (h, s, s):
            raise ValueError(f"attn_bias must have shape (H, S, S) = {(h, s, s)} or (B, H, S, S), got "
                             f"{np.shape(attn_bias)}")
        q, rq = self._rotate(F.split_heads(self.q_proj(x), h), positions)        # (B, H, S, Dh)
        k, rk = self._rotate(F.split_heads(self.k_proj(x), hkv), positions)      # (B, Hkv, S, Dh)
        v = F.split_heads(self.v_proj(x), hkv)                                  # (B, Hkv, S, Dh)
        mask = self._mask(s, s, 0, attn_bias, is_causal, attn_mask)
        ctx, cache = F.scaled_dot_product_attention_forward(
            q, k, v, attn_mask=mask, dropout_p=self.dropout, enable_gqa=hkv != h, training=self.training,
            rng=self.rng)                                                        # (B, H, S, Dh)
        self.last_mask = cache.dropout.mask                                      # for nt.dropout_masks
        self.last_weights = cache.probs                                          # (B, H, S, S): plot attention
        self._save(_Saved(cache, rq, rk, attn_bias is not None and np.shape(attn_bias), x.shape))
        return self.o_proj(F.merge_heads(ctx))                                  # (B, S, D)

    def backward(self, dout):
        """dout (B, S, D) -> dx (B, S, D), or ``(dx, dattn_bias)`` when the forward had an ``attn_bias``.

        The forward read x three times (q, k and v projections), so dx is the sum of the three paths.
        Each rotation is orthogonal, so its backward rotates the gradient back (by -theta). The bias
        was added to the scores, so its gradient is the scores' gradient dA, summed over the batch
        when the bias was shared by every batch row (a broadcast forward is a sum backward). Under
        :func:`numpy_transformer.trace` the attention backward's intermediates are recorded (dq and dk
        are those of the rotated q and k).
        """
        saved = self._take()
        bias_shape = saved.bias_shape
        dout = check_grad(dout, "dout", saved.shape, self.dtype)
        dctx = F.split_heads(self.o_proj.backward(dout), self.num_heads)        # (B, H, S, Dh)
        record = hooks.attention_recorder(self) if hooks.active() else None    # dP, dA, dq, dk, dv
        grads = F.scaled_dot_product_attention_backward(dctx, saved.attn, attn_mask_grad=bool(bias_shape),
                                                        record=record)
        dq, dk, dv = grads[:3]                                                   # dk, dv: (B, Hkv, S, Dh)
        if self.rope:
            dq, dk = F.rope_backward(dq, saved.rope_q), F.rope_backward(dk, saved.rope_k)
        dx = self.q_proj.backward(F.merge_heads(dq))
        dx = dx + self.k_proj.backward(F.merge_heads(dk))
        dx = dx + self.v_proj.backward(F.merge_heads(dv))                       # (B, S, D)
        if not bias_shape:
            return dx
        dmask = grads[3]                                                         # the mask's shape
        return dx, _sum_to(dmask, bias_shape)                                    # (H, S, S) or (B, H, S, S)

    def forward_cached(self, x, cache, slot, attn_bias=None, attn_mask=None, positions=None):
        """Inference only: the new positions x (B, S, D) attend, causally, to themselves and to the keys
        and values of ``slot`` in ``cache`` (a :class:`~numpy_transformer.nn.KVCache`), which grows by S.

        New query i sits at absolute position P + i (P = the positions cached so far); ``positions``
        (S,) or (B, S) overrides the rotary positions (left-padded rows). ``attn_bias`` (H, S, P+S) or
        (B, H, S, P+S) are the bias rows of these queries; ``attn_mask`` an additive mask broadcastable
        to (B, H, S, P+S). The cache holds Hkv heads: grouped-query attention's memory saving. Nothing is
        saved for a backward.
        """
        x = check_float_input(x, "x", self.dtype, ndim=3, last_dim=self.embed_dim, shape_doc="(B, S, D)")
        b, s, _ = x.shape
        past = cache.get_seq_length(slot)
        if positions is None:
            positions = past + np.arange(s)
        q, _ = self._rotate(F.split_heads(_apply(self.q_proj, x), self.num_heads), positions)   # (B, H, S, Dh)
        k, _ = self._rotate(F.split_heads(_apply(self.k_proj, x), self.num_kv_heads), positions)
        v = F.split_heads(_apply(self.v_proj, x), self.num_kv_heads)             # (B, Hkv, S, Dh)
        k, v = cache.update(slot, k, v)                                          # (B, Hkv, P+S, Dh)
        mask = self._mask(s, past + s, past, attn_bias, True, attn_mask)
        ctx, _ = F.scaled_dot_product_attention_forward(
            q, k, v, attn_mask=mask, dropout_p=self.dropout, enable_gqa=self.num_kv_heads != self.num_heads,
            training=self.training, rng=self.rng)                                # (B, H, S, Dh)
        return _apply(self.o_proj, F.merge_heads(ctx))                          # (B, S, D)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
                f"rope={self.rope}, dropout={self.dropout}")


def _apply(linear, x):
    """``linear``'s map applied to x with nothing saved (inference)."""
    return F.linear_forward(x, linear.weight.data, None if linear.bias is None else linear.bias.data)[0]


def _sum_to(grad, shape):
    """Sum ``grad`` over the leading axes and the size-1 axes that broadcasting added (to ``shape``)."""
    lead = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(lead))) if lead else grad
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad
