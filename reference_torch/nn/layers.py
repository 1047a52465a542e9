"""Twins of ``numpy_transformer/nn/layers.py``: dropout (replaying NumPy's keep-masks), the token
embedding and the positional encodings.

=================================  =====================================  =================================
twin                               mirrors                                ``state_dict`` keys
=================================  =====================================  =================================
``Dropout``                        ``torch.nn.Dropout``                   (none)
``TokenEmbedding``                 ``nt.TokenEmbedding``                  ``embedding.weight``
``PositionalEncoding``             ``nt.PositionalEncoding``              (none: ``pe`` is a non-persistent buffer)
``LearnedPositionalEmbedding``     ``nt.LearnedPositionalEmbedding``      ``weight``
=================================  =====================================  =================================
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .module import ReferenceModule, as_tensor

__all__ = ["dropout", "Dropout", "TokenEmbedding", "sinusoidal_table", "PositionalEncoding",
           "LearnedPositionalEmbedding"]


def _mask_tensor(mask, like):
    """A keep-mask (ndarray or tensor) as a bool tensor on ``like``'s device, checked against its shape."""
    m = as_tensor(mask, device=like.device)
    if m.dtype != torch.bool:
        raise TypeError(f"a dropout keep-mask must be bool (True = keep), got dtype {m.dtype}")
    try:
        if torch.broadcast_shapes(m.shape, like.shape) != like.shape:
            raise RuntimeError
    except RuntimeError:
        raise ValueError(f"dropout keep-mask of shape {tuple(m.shape)} does not fit the input of shape "
                         f"{tuple(like.shape)}") from None
    return m


def dropout(x, p, mask=None):
    """Inverted dropout ``x * (keep * 1/(1-p))``, replaying ``mask`` (bool keep-mask) when given.

    Exactly the arithmetic of ``numpy_transformer.functional.dropout_forward``: the mask is scaled
    first, then multiplied in; ``p == 1`` drops everything.
    """
    if p == 0.0:
        return x
    if mask is None:
        mask = torch.zeros_like(x, dtype=torch.bool) if p == 1.0 else torch.rand_like(x) >= p
    else:
        mask = _mask_tensor(mask, x)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return x * (mask.to(x.dtype) * scale)


class Dropout(ReferenceModule):
    """``torch.nn.Dropout`` that can replay a given keep-mask (``self.mask``); identity in eval mode."""

    replays_dropout = True                  # set_dropout_masks addresses it by its own name

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p!r}")
        self.p = float(p)
        self.mask = None

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return dropout(x, self.p, self.mask)

    def extra_repr(self):
        return f"p={self.p}" + (", replaying a mask" if self.mask is not None else "")


class TokenEmbedding(ReferenceModule):
    """``embedding(ids) * sqrt(d_model)`` (the twin of ``nt.TokenEmbedding``)."""

    def __init__(self, vocab_size, d_model, device=None, dtype=None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, device=device, dtype=dtype)

    def forward(self, ids):
        """ids (B, S) int -> (B, S, D)."""
        return self.embedding(as_tensor(ids, device=self.embedding.weight.device)) * math.sqrt(self.d_model)


def sinusoidal_table(max_len, d_model, dtype=torch.float64):
    """``pe[pos, 2i] = sin(pos / 10000^(2i/D))``, ``pe[pos, 2i+1] = cos(pos / 10000^(2i/D))``: (max_len, D).

    Computed in float64 and then cast, as ``nt.sinusoidal_table``.
    """
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)                 # (max_len, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64)
                         * (-math.log(10000.0) / d_model))                           # (ceil(D/2),)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)                                     # even columns
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])                     # odd columns
    return pe.to(dtype)


class PositionalEncoding(ReferenceModule):
    """Adds the fixed sinusoidal table: ``x + pe[:S]`` (twin of ``nt.PositionalEncoding``).

    ``pe`` is a non-persistent buffer: not a parameter, not in ``state_dict``. It is kept in float64
    (or ``dtype``) and cast to the input's dtype in ``forward``.
    """

    def __init__(self, d_model, max_len=5000, device=None, dtype=None):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, dtype or torch.float64).to(device),
                             persistent=False)

    def forward(self, x):
        """x (B, S, D) -> (B, S, D)."""
        s = x.shape[1]
        if s > self.max_len:
            raise ValueError(f"sequence length {s} exceeds PositionalEncoding max_len={self.max_len}; "
                             "build the module with a larger max_len")
        return x + self.pe[:s].to(x.dtype)                                           # (B, S, D) + (S, D)


class LearnedPositionalEmbedding(ReferenceModule):
    """Adds a trained table: ``x + embedding(arange(offset, offset + S), weight)`` (twin of
    ``nt.LearnedPositionalEmbedding``; autograd sums the batch's gradients into each used row)."""

    def __init__(self, max_len, d_model, device=None, dtype=None):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(torch.randn(max_len, d_model, device=device, dtype=dtype))

    def forward(self, x, offset=0):
        """x (B, S, D) -> (B, S, D)."""
        s = x.shape[1]
        if offset + s > self.max_len:
            raise ValueError(f"sequence length {s} exceeds LearnedPositionalEmbedding max_len={self.max_len}")
        positions = torch.arange(offset, offset + s, device=self.weight.device)
        return x + F.embedding(positions, self.weight)                               # (B, S, D) + (S, D)
