"""Twins of ``numpy_transformer/nn/decoder.py``, written out step by step (autograd gives the gradients),
and the torch side of the registry's decoder cases.

=============================  =====================================  ===================================
twin                           mirrors                                ``state_dict`` keys
=============================  =====================================  ===================================
``TransformerDecoderLayer``    ``torch.nn.TransformerDecoderLayer``   ``self_attn.*``, ``multihead_attn.*``,
                                                                      ``linear1.*``, ``linear2.*``,
                                                                      ``norm1.*``, ``norm2.*``, ``norm3.*``
``TransformerDecoder``         ``torch.nn.TransformerDecoder``        ``layers.{i}.*``, ``norm.*``
=============================  =====================================  ===================================

As the encoder twins (:mod:`reference_torch.nn.transformer`): ``batch_first=True`` by default, stacks
take a list of layers (``TransformerDecoder.stack(layer, n)`` copies one), every dropout replays the
NumPy masks (``set_dropout_masks(nt.dropout_masks(ours))``: ``dropout``, ``dropout1..3``, ``self_attn``
and ``multihead_attn`` for the attention dropouts), a hint with no mask applies the causal mask.
:func:`fill_causal_masks` gives ``torch.nn``'s decoder modules (and ``Transformer``, whose twin is in
:mod:`reference_torch.nn.seq2seq`) the masks they want beside a hint.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from . import activations
from .attention import MultiheadAttention
from .layers import Dropout
from .module import ReferenceModule, as_tensor
from .transformer import feed_forward, is_causal_mask

DECODER_KINDS = ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")

__all__ = ["DECODER_KINDS", "TransformerDecoderLayer", "TransformerDecoder", "torch_modules", "fill_causal_masks"]


class TransformerDecoderLayer(ReferenceModule):
    """Twin of ``torch.nn.TransformerDecoderLayer``::

        norm_first=False (post-LN):  x = norm1(x + sa(x));  x = norm2(x + mha(x, m));  x = norm3(x + ff(x))
        norm_first=True  (pre-LN):   x = x + sa(norm1(x));  x = x + mha(norm2(x), m);  x = x + ff(norm3(x))
        sa(x) = dropout1(self_attn(x, x, x)[0]);   mha(x, m) = dropout2(multihead_attn(x, m, m)[0])
        ff(x) = dropout3(linear2(dropout(activation(linear1(x)))))
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=True, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True, **kw)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.batch_first = batch_first
        self.activation = activations.activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """tgt (B, S, D), memory (B, T, D) (or sequence-first; or unbatched (S, D), (T, D)) -> like tgt."""
        unbatched = tgt.dim() == 2
        if unbatched:                                                                  # a batch of one
            x, m = tgt[None], memory[None]
            tgt_key_padding_mask = None if tgt_key_padding_mask is None else as_tensor(tgt_key_padding_mask)[None]
            memory_key_padding_mask = (None if memory_key_padding_mask is None
                                       else as_tensor(memory_key_padding_mask)[None])
        elif self.batch_first:
            x, m = tgt, memory
        else:
            x, m = tgt.transpose(0, 1), memory.transpose(0, 1)                         # (B, S, D), (B, T, D)
        sa = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        ca = (memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *sa)
            x = x + self._mha_block(self.norm2(x), m, *ca)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, *sa))
            x = self.norm2(x + self._mha_block(x, m, *ca))
            x = self.norm3(x + self._ff_block(x))
        if unbatched:
            return x[0]
        return x if self.batch_first else x.transpose(0, 1)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)
        return self.dropout1(out)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        out, _ = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                     need_weights=False, is_causal=is_causal)
        return self.dropout2(out)

    def _ff_block(self, x):
        return self.dropout3(feed_forward(x, self.linear1, self.activation, self.dropout, self.linear2))


class TransformerDecoder(ReferenceModule):
    """Twin of ``torch.nn.TransformerDecoder``: ``layers`` in order (each attends to the same memory),
    then the optional final ``norm``."""

    def __init__(self, layers, norm=None):
        super().__init__()
        if isinstance(layers, nn.Module) and not isinstance(layers, nn.ModuleList):
            raise TypeError("TransformerDecoder takes a list of layers; use TransformerDecoder.stack(layer, n)")
        self.layers = nn.ModuleList(layers)
        self.num_layers = len(self.layers)
        self.norm = norm

    @classmethod
    def stack(cls, decoder_layer, num_layers, norm=None):
        """``num_layers`` deep copies of ``decoder_layer`` (the ``torch.nn.TransformerDecoder`` way)."""
        return cls([copy.deepcopy(decoder_layer) for _ in range(num_layers)], norm)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        if tgt_is_causal is None:
            tgt_is_causal = is_causal_mask(tgt_mask)
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            x = self.norm(x)
        return x


# --------------------------------------------------------------------------------------------------
# the torch table's entries for the decoder modules (reference_torch.table.MODULES)
# --------------------------------------------------------------------------------------------------

def _decoder_layer(m, twin=False):
    cls = TransformerDecoderLayer if twin else nn.TransformerDecoderLayer
    return cls(m.d_model, m.self_attn.num_heads, dim_feedforward=m.linear1.out_features, dropout=m.dropout.p,
               activation=activations.activation(m.activation), layer_norm_eps=m.norm1.eps, batch_first=m.batch_first,
               norm_first=m.norm_first, bias=m.linear1.bias is not None)


def _decoder(m, twin=False, build=None):
    norm = None if m.norm is None else build(m.norm, twin)
    if twin:
        return TransformerDecoder([_decoder_layer(layer, twin=True) for layer in m.layers], norm)
    return nn.TransformerDecoder(_decoder_layer(m.layers[0]), m.num_layers, norm=norm)


def torch_modules(build):
    """The table's entries; ``build(np_module, twin)`` builds any sub-module (the table's builder)."""
    return {"TransformerDecoderLayer": _decoder_layer,
            "TransformerDecoder": lambda m, twin=False: _decoder(m, twin, build)}


def _causal(s, t):
    return torch.ones(s, t, dtype=torch.bool).triu(1)


# (mask keyword, hint keyword, query input, key input) of each decoder module's attention masks
_HINTS = {"TransformerDecoderLayer": (("tgt_mask", "tgt_is_causal", 0, 0), ("memory_mask", "memory_is_causal", 0, 1)),
          "TransformerDecoder": (("tgt_mask", "tgt_is_causal", 0, 0), ("memory_mask", "memory_is_causal", 0, 1)),
          "Transformer": (("src_mask", "src_is_causal", 0, 0), ("tgt_mask", "tgt_is_causal", 1, 1),
                          ("memory_mask", "memory_is_causal", 1, 0))}


def fill_causal_masks(name, inputs, kwargs, batch_first):
    """For ``torch.nn``: each causal hint given without its mask gets the causal mask (torch wants both;
    ours applies it alone). ``inputs`` are the forward's positional tensors; ``kwargs`` is changed."""
    for mask_kw, hint_kw, qi, ki in _HINTS.get(name, ()):
        if kwargs.get(hint_kw) and kwargs.get(mask_kw) is None:
            q, k = inputs[qi], inputs[ki]
            seq = 0 if q.dim() == 2 or not batch_first else 1
            kwargs[mask_kw] = _causal(q.shape[seq], k.shape[seq])
    return kwargs
