"""Twins of ``numpy_transformer/nn/transformer.py``: the encoder layer and the encoder stack.

=============================  =====================================  ===================================
twin                           mirrors                                ``state_dict`` keys
=============================  =====================================  ===================================
``TransformerEncoderLayer``    ``torch.nn.TransformerEncoderLayer``   ``self_attn.*``, ``linear1.*``,
                                                                      ``linear2.*``, ``norm1.*``, ``norm2.*``
``TransformerEncoder``         ``torch.nn.TransformerEncoder``        ``layers.{i}.*``, ``norm.*``
=============================  =====================================  ===================================

The constructors take torch's arguments, except ``batch_first=True`` by default and
``TransformerEncoder(layers, norm)`` taking a list (``TransformerEncoder.stack(layer, n)`` for torch's
copy-one-layer form). Every dropout replays NumPy's masks (:mod:`reference_torch.nn.module`).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from . import activations
from .attention import MultiheadAttention, causal_mask
from .layers import Dropout
from .module import ReferenceModule, as_tensor

__all__ = ["feed_forward", "TransformerEncoderLayer", "is_causal_mask", "TransformerEncoder"]


def feed_forward(x, linear1, activation, dropout_module, linear2):
    """``linear2(dropout(activation(linear1(x))))``: (..., D) -> (..., F) -> (..., D)."""
    return linear2(dropout_module(activation(linear1(x))))


class TransformerEncoderLayer(ReferenceModule):
    """Twin of ``torch.nn.TransformerEncoderLayer`` (same arguments and ``state_dict`` keys)::

        norm_first=False (post-LN):  x = norm1(x + sa(x));    x = norm2(x + ff(x))
        norm_first=True  (pre-LN):   x = x + sa(norm1(x));    x = x + ff(norm2(x))
        sa(x) = dropout1(self_attn(x, x, x)[0])
        ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))

    ``batch_first`` defaults to True here (as ``numpy_transformer``); torch's default is False.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True, **kw)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.batch_first = batch_first
        self.activation = activations.activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (B, S, D) (or (S, B, D) when not batch_first; or unbatched (S, D)) -> same shape."""
        unbatched = src.dim() == 2
        if unbatched:                                                                  # a batch of one
            x = src[None]
            src_key_padding_mask = None if src_key_padding_mask is None else as_tensor(src_key_padding_mask)[None]
        else:
            x = src if self.batch_first else src.transpose(0, 1)                       # (B, S, D)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        if unbatched:
            return x[0]
        return x if self.batch_first else x.transpose(0, 1)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)
        return self.dropout1(out)

    def _ff_block(self, x):
        return self.dropout2(feed_forward(x, self.linear1, self.activation, self.dropout, self.linear2))


def is_causal_mask(mask):
    """Whether ``mask`` is the (S, S) causal mask (bool True above the diagonal, or float -inf/0)."""
    if mask is None:
        return False
    mask = as_tensor(mask)
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        return False
    causal = causal_mask(mask.shape[0], device=mask.device)
    if mask.dtype == torch.bool:
        return bool(torch.equal(mask, causal))
    return bool(torch.isneginf(mask[causal]).all() and (mask[~causal] == 0).all())


class TransformerEncoder(ReferenceModule):
    """Twin of ``torch.nn.TransformerEncoder``: ``layers`` in order, then the optional final ``norm``.

    Parameters
    ----------
    layers : iterable of TransformerEncoderLayer
        Registered as ``layers.0``, ``layers.1``, ... Use :meth:`stack` for torch's
        ``(encoder_layer, num_layers)`` form (deep copies of one layer).
    norm : nn.LayerNorm, optional
    """

    def __init__(self, layers, norm=None):
        super().__init__()
        if isinstance(layers, nn.Module) and not isinstance(layers, nn.ModuleList):
            raise TypeError("TransformerEncoder takes a list of layers; use "
                            "TransformerEncoder.stack(layer, num_layers) to copy one")
        self.layers = nn.ModuleList(layers)
        self.num_layers = len(self.layers)
        self.norm = norm

    @classmethod
    def stack(cls, encoder_layer, num_layers, norm=None):
        """``num_layers`` deep copies of ``encoder_layer`` (the ``torch.nn.TransformerEncoder`` way)."""
        return cls([copy.deepcopy(encoder_layer) for _ in range(num_layers)], norm)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """src (B, S, D) -> (B, S, D). ``is_causal=None`` detects a causal ``mask`` (a hint, as torch)."""
        if is_causal is None:
            is_causal = is_causal_mask(mask)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        if self.norm is not None:
            x = self.norm(x)
        return x
