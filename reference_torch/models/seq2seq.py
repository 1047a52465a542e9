"""PyTorch twin of :class:`numpy_transformer.Seq2SeqModel`: ``nn.Embedding`` for source and target,
the same positions, ``torch.nn.Transformer(batch_first=True)`` and ``nn.Linear``; its ``state_dict`` has
exactly the NumPy model's keys, so weights move over unchanged (``load_state_dict`` of torch tensors).

* ``twin=False`` (default): ``torch.nn.Transformer`` itself; dropout is not replayed (compare with
  ``dropout=0`` or in eval mode).
* ``twin=True``: the hand-written :class:`reference_torch.nn.seq2seq.Transformer` twin, whose dropouts
  replay the NumPy masks (``set_dropout_masks(nt.dropout_masks(model))``); the embeddings' shared
  dropout replays ``embed_masks=model.dropout.masks`` (source, target), one mask per use: the
  lockstep twin of ``train --model seq2seq --check-torch``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import nn

import numpy_transformer as nt

from ..convert import torch_dtype
from ..nn.activations import activation as activation_fn
from ..nn.layers import Dropout, dropout
from ..nn.module import ReferenceModule
from ..nn.seq2seq import Transformer

__all__ = ["TorchSeq2SeqModel", "twin_of"]


class TorchSeq2SeqModel(ReferenceModule):
    """The same constructor arguments as ``nt.Seq2SeqModel`` (dtype a torch dtype)."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, nhead=8, num_encoder_layers=2,
                 num_decoder_layers=2, dim_feedforward=2048, dropout=0.1, max_len=5000, activation="relu",
                 norm_first=False, pos_encoding="sinusoidal", dtype=torch.float32, twin=False):
        super().__init__()
        kw = dict(dtype=dtype)
        self.src_embed = nn.Embedding(src_vocab_size, d_model, **kw)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, **kw)
        self.learned = pos_encoding == "learned"
        if self.learned:
            self.src_pos_embed = nn.Embedding(max_len, d_model, **kw)
            self.tgt_pos_embed = nn.Embedding(max_len, d_model, **kw)
        else:
            pe = torch.from_numpy(nt.sinusoidal_table(max_len, d_model, np.float64)).to(dtype)
            self.register_buffer("pe", pe, persistent=False)
        self.p = dropout
        self.dropout = Dropout(dropout) if twin else nn.Dropout(dropout)
        with warnings.catch_warnings():       # torch's nested-tensor note about norm_first: not our concern
            warnings.simplefilter("ignore")
            cls = Transformer if twin else nn.Transformer
            self.transformer = cls(d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward,
                                   dropout, activation_fn(activation), batch_first=True,
                                   norm_first=norm_first, **kw)
        self.head = nn.Linear(d_model, tgt_vocab_size, **kw)
        self.scale = math.sqrt(d_model)

    def _embed(self, ids, embed, pos_embed, mask=None):
        x = embed(ids) * self.scale
        s = ids.shape[1]
        x = x + (pos_embed(torch.arange(s)) if self.learned else self.pe[:s])
        if mask is not None and self.training:
            return dropout(x, self.p, mask)                        # the NumPy model's mask of this use
        return self.dropout(x)

    def forward(self, src, tgt, src_key_padding_mask=None, embed_masks=None):
        """``embed_masks``: the (source, target) keep-masks of the embeddings' dropout to replay."""
        src_mask, tgt_mask = (None, None) if embed_masks is None else embed_masks
        s = self._embed(src, self.src_embed, getattr(self, "src_pos_embed", None), src_mask)
        t = self._embed(tgt, self.tgt_embed, getattr(self, "tgt_pos_embed", None), tgt_mask)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=t.dtype)
        y = self.transformer(s, t, tgt_mask=causal, src_key_padding_mask=src_key_padding_mask,
                             memory_key_padding_mask=src_key_padding_mask, tgt_is_causal=True)
        return self.head(y)


def twin_of(model, twin=False):
    """A ``TorchSeq2SeqModel`` with ``model``'s configuration and weights (the NumPy model's dtype);
    ``twin=True``: built from the dropout-replaying twins."""
    cfg = dict(model.config)
    dtype = torch_dtype(cfg.pop("dtype"))
    twin = TorchSeq2SeqModel(**cfg, dtype=dtype, twin=twin)
    twin.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    return twin
