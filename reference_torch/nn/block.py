"""Twins of ``numpy_transformer/nn/block.py``: :class:`FeedForward` (the position-wise feed-forward
network, keys ``linear1.*``, ``linear2.*``) and :class:`TransformerBlock` (keys ``norm1``,
``self_attn.*``, ``norm2``, ``mlp.*``: the modern options, GQA and rotary included), written with
torch ops, every dropout replaying NumPy's masks.
"""

from __future__ import annotations

import torch
from torch import nn

from numpy_transformer.nn.block import GATED_FFNS

from ..convert import torch_dtype
from . import activations
from .feedforward import GatedFeedForward
from .gqa import GroupedQueryAttention
from .layers import Dropout
from .module import ReferenceModule
from .transformer import feed_forward

__all__ = ["FeedForward", "TransformerBlock", "block_like"]


class FeedForward(ReferenceModule):
    """The position-wise feed-forward network ``linear2(dropout(activation(linear1(x))))``.

    ``TransformerEncoderLayer`` runs the same :func:`~reference_torch.nn.transformer.feed_forward` on its
    own ``linear1``/``linear2`` (so its ``state_dict`` keys stay those of ``torch.nn.TransformerEncoderLayer``).
    """

    def __init__(self, d_model, dim_feedforward=2048, dropout=0.1, activation="relu", bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.activation = activations.activation(activation)

    def forward(self, x):
        return feed_forward(x, self.linear1, self.activation, self.dropout, self.linear2)


class TransformerBlock(ReferenceModule):
    """Twin of ``nt.TransformerBlock`` (keys ``norm1``, ``self_attn.*``, ``norm2``, ``mlp.*``)."""

    def __init__(self, d_model, nhead, dim_feedforward, num_kv_heads=None, dropout=0.0, ffn="gelu",
                 norm="layernorm", norm_first=True, bias=True, layer_norm_eps=1e-5, rope=False, rope_base=10000.0,
                 rope_interleaved=False, dtype=torch.float64, use_sdpa=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = GroupedQueryAttention(d_model, nhead, num_kv_heads, bias, dropout, rope, rope_base,
                                               rope_interleaved, dtype=dtype, use_sdpa=use_sdpa)
        if ffn in GATED_FFNS:                       # "swiglu" ...: the gate's activation is the variant's
            self.mlp = GatedFeedForward(d_model, dim_feedforward, bias=bias, act=GATED_FFNS[ffn].activation,
                                        dtype=dtype)
        else:
            self.mlp = FeedForward(d_model, dim_feedforward, dropout, activation=ffn, bias=bias, dtype=dtype)
        if norm == "rmsnorm":
            self.norm1, self.norm2 = (nn.RMSNorm(d_model, eps=layer_norm_eps, dtype=dtype) for _ in range(2))
        else:
            self.norm1, self.norm2 = (nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
                                      for _ in range(2))
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(self, x, attn_bias=None, is_causal=False, attn_mask=None, positions=None):
        kw = dict(attn_bias=attn_bias, is_causal=is_causal, attn_mask=attn_mask, positions=positions)
        if self.norm_first:
            x = x + self.dropout1(self.self_attn(self.norm1(x), **kw))
            return x + self.dropout2(self.mlp(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, **kw)))
        return self.norm2(x + self.dropout2(self.mlp(x)))


def block_like(block, twin=True):
    """The torch module for an ``nt.TransformerBlock`` (weights not copied)."""
    a = block.self_attn
    return TransformerBlock(block.d_model, a.num_heads, _ffn_width(block), a.num_kv_heads, a.dropout, block.ffn,
                            block.norm, block.norm_first, a.q_proj.bias is not None, block.norm1.eps, a.rope,
                            a.rope_base, a.rope_interleaved, dtype=torch_dtype(block.dtype), use_sdpa=not twin)


def _ffn_width(block):
    mlp = block.mlp
    return mlp.linear1.out_features if hasattr(mlp, "linear1") else mlp.up_proj.out_features
