"""Twin of ``numpy_transformer/nn/gqa.py``: :class:`GroupedQueryAttention` (keys ``q_proj``, ``k_proj``,
``v_proj``, ``o_proj``), the same maths written with torch ops (autograd for the gradients), the
attention dropout replaying NumPy's masks.

The grouped heads are expanded the textbook way, ``k.repeat_interleave(H // Hkv, dim=1)``, and the
attention is :func:`reference_torch.nn.attention.attention` (scores, mask, softmax, dropout, times v):
an independent route from ours, which never copies the shared heads. ``use_sdpa=True`` runs torch's
own ``scaled_dot_product_attention(enable_gqa=True)`` instead.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as TF
from torch import nn

from ..convert import torch_dtype
from .attention import attention
from .module import ReferenceModule
from .rotary import rope

__all__ = ["GroupedQueryAttention", "attention_like"]


class GroupedQueryAttention(ReferenceModule):
    """Twin of ``nt.GroupedQueryAttention`` (keys ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``)."""

    replays_attention_dropout = True        # set_dropout_masks addresses it by its own name

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, bias=False, dropout=0.0, rope=False,
                 rope_base=10000.0, rope_interleaved=False, dtype=torch.float64, use_sdpa=False):
        super().__init__()
        self.use_sdpa = use_sdpa            # torch's own F.scaled_dot_product_attention(enable_gqa=True)
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads or num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout, self.rope, self.rope_base, self.rope_interleaved = dropout, rope, rope_base, rope_interleaved
        kv = self.num_kv_heads * self.head_dim
        kw = dict(bias=bias, dtype=dtype)
        self.q_proj, self.k_proj = nn.Linear(embed_dim, embed_dim, **kw), nn.Linear(embed_dim, kv, **kw)
        self.v_proj, self.o_proj = nn.Linear(embed_dim, kv, **kw), nn.Linear(embed_dim, embed_dim, **kw)
        self.dropout_mask = None

    def _rotate(self, x, positions):
        if not self.rope:
            return x
        if positions is not None:
            positions = torch.as_tensor(positions)
            positions = positions[:, None, :] if positions.dim() == 2 else positions          # (B, 1, S)
        return rope(x, positions, base=self.rope_base, interleaved=self.rope_interleaved)

    def forward(self, x, attn_bias=None, is_causal=False, attn_mask=None, positions=None):
        b, s, d = x.shape
        h, hkv, dh = self.num_heads, self.num_kv_heads, self.head_dim
        q = self._rotate(self.q_proj(x).view(b, s, h, dh).transpose(1, 2), positions)       # (B, H, S, Dh)
        k = self._rotate(self.k_proj(x).view(b, s, hkv, dh).transpose(1, 2), positions)     # (B, Hkv, S, Dh)
        v = self.v_proj(x).view(b, s, hkv, dh).transpose(1, 2)                              # (B, Hkv, S, Dh)
        mask = torch.zeros(s, s, dtype=x.dtype)
        if attn_bias is not None:
            mask = mask + attn_bias
        if is_causal:
            mask = mask.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
        if attn_mask is not None:
            mask = mask + torch.as_tensor(attn_mask, dtype=x.dtype)
        if self.use_sdpa:                   # torch's kernel; dropout 0 (its masks cannot be replayed)
            ctx = TF.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=hkv != h)
        else:
            k, v = k.repeat_interleave(h // hkv, dim=1), v.repeat_interleave(h // hkv, dim=1)   # (B, H, S, Dh)
            ctx, _ = attention(q, k, v, mask, self.dropout, self.training, self.dropout_mask)  # (B, H, S, Dh)
        return self.o_proj(ctx.transpose(1, 2).reshape(b, s, d))


def attention_like(m, twin=True):
    """The torch module for an ``nt.GroupedQueryAttention`` (weights not copied: ``table.torch_module``
    does that): the repeat_interleave twin, or (``twin=False``) torch's own sdpa with ``enable_gqa``."""
    return GroupedQueryAttention(m.embed_dim, m.num_heads, m.num_kv_heads, m.q_proj.bias is not None, m.dropout,
                                 m.rope, m.rope_base, m.rope_interleaved, dtype=torch_dtype(m.dtype),
                                 use_sdpa=not twin)
