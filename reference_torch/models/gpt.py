"""PyTorch twin of :class:`numpy_transformer.GPT`, with dropout-mask replay and a KV cache of its own.

``GPT(config, twin=True)`` is built from torch parts with the NumPy model's ``state_dict`` keys
(``wte``, ``wpe``, ``h.{i}.*``, ``ln_f``, ``lm_head``; tied weights tied the torch way,
``lm_head.weight = wte.weight``), so weights move both ways unchanged (:func:`to_torch`,
:func:`from_torch`). Its blocks are

* ``twin=True``: the hand-written :class:`reference_torch.nn.transformer.TransformerEncoderLayer` twins, whose
  dropouts replay the NumPy masks (``set_dropout_masks(nt.dropout_masks(model))``): the lockstep
  training test and the registry's twin comparison;
* ``twin=False``: ``torch.nn.TransformerEncoderLayer(norm_first=True)`` itself (dropout 0): the
  registry's ``torch.nn`` comparison.

``forward(ids, past_key_values=None, use_cache=False, attention_mask=None)``: the full forward (causal
mask; a left-padded batch's ``attention_mask`` (B, S) masks the padded keys and shifts each row's
positions to ``cumsum(attention_mask) - 1`` clipped at 0, Hugging Face's ``position_ids``), or, with
``use_cache``, the incremental one written with torch ops (``past_key_values`` a list of per-layer
``(keys, values)`` (B, H, T, Dh), Hugging Face's legacy format), used by the generation benchmark and
checked against the full forward in the tests. :func:`greedy` is the benchmark's decoding loop.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import numpy_transformer as nt

from ..convert import torch_dtype
from ..nn import block as RB
from ..nn.activations import activation
from ..nn.layers import Dropout, PositionalEncoding
from ..nn.module import ReferenceModule
from ..nn.position_bias import RelativePositionBias, alibi_bias
from ..nn.transformer import TransformerEncoderLayer

__all__ = ["GPT", "to_torch", "from_torch", "greedy"]


class GPT(ReferenceModule):
    """ids (B, S) -> logits (B, S, V), the same maths and keys as ``nt.GPT`` (``config``: an
    ``nt.GPTConfig`` or its dict)."""

    def __init__(self, config, twin=True):
        super().__init__()
        c = nt.GPTConfig(**config) if isinstance(config, dict) else config
        self.config = c
        kw = dict(dtype=torch_dtype(c.dtype))
        d = c.n_embd
        self.wte = nn.Embedding(c.vocab_size, d, **kw)
        if c.positions == "learned":
            self.wpe = nn.Embedding(c.block_size, d, **kw)
        elif c.positions == "sinusoidal":
            self.pos_encoding = PositionalEncoding(d, max_len=c.block_size)
        elif c.positions == "relative":
            self.relative_position_bias = RelativePositionBias(
                c.n_head, c.relative_attention_num_buckets, c.relative_attention_max_distance,
                bidirectional=False).to(kw["dtype"])
        self.drop = Dropout(c.dropout)
        if c.modern:      # the TransformerBlock twins (torch.nn: torch's sdpa with enable_gqa inside)
            self.h = nn.ModuleList(RB.TransformerBlock(d, c.n_head, c.ffn_dim, c.num_kv_heads, c.dropout, c.ffn, c.norm,
                                                       True, c.bias, c.layer_norm_eps, c.positions == "rope",
                                                       c.rope_base, use_sdpa=not twin, **kw)
                                   for _ in range(c.n_layer))
        else:
            layer = TransformerEncoderLayer if twin else nn.TransformerEncoderLayer
            self.h = nn.ModuleList(layer(d, c.n_head, c.ffn_dim, c.dropout, activation=activation(c.ffn),
                                         layer_norm_eps=c.layer_norm_eps, batch_first=True, norm_first=True,
                                         bias=c.bias, **kw) for _ in range(c.n_layer))
        if c.norm == "rmsnorm":
            self.ln_f = nn.RMSNorm(d, eps=c.layer_norm_eps, **kw)
        else:
            self.ln_f = nn.LayerNorm(d, eps=c.layer_norm_eps, bias=c.bias, **kw)
        self.lm_head = nn.Linear(d, c.vocab_size, bias=False, **kw)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.wte.weight

    def _embed(self, ids, past, position_ids=None):
        s = ids.shape[1]
        x = self.wte(ids)                                                            # (B, S, D)
        pos = torch.arange(past, past + s) if position_ids is None else position_ids   # (S,) or (B, S)
        if self.config.positions == "learned":
            return x + self.wpe(pos)
        if self.config.positions == "sinusoidal":
            return x + self.pos_encoding.pe[pos].to(x.dtype)
        return x

    def _bias(self, s, t, dtype):
        """The relative bias (H, S, T) (learned) or ALiBi's (H, S, T) (a constant) of the last S queries."""
        if self.config.positions == "relative":
            return self.relative_position_bias(s, t)
        if self.config.positions == "alibi":
            return alibi_bias(self.config.n_head, s, t, dtype)          # from the paper's get_slopes
        return None

    def forward(self, ids, past_key_values=None, use_cache=False, attention_mask=None):
        ids = ids if isinstance(ids, torch.Tensor) else torch.as_tensor(np.asarray(ids, dtype=np.int64))
        if use_cache:
            if attention_mask is not None:
                raise NotImplementedError("the twin's cached forward takes no attention_mask")
            if self.config.modern:
                raise NotImplementedError("the twin's cached forward covers the TransformerEncoderLayer blocks; "
                                          "nt.GPT's cached path for the modern blocks is checked against the full "
                                          "forward (tests/models/test_gpt.py)")
            return self._cached_forward(ids, past_key_values)
        s = ids.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)                          # True = may not attend
        padding, position_ids = None, None
        if attention_mask is not None:
            real = torch.as_tensor(np.asarray(attention_mask)).long()                # (B, S) 1 = real
            position_ids = (real.cumsum(-1) - 1).clamp(min=0)                        # Hugging Face's
            padding = real == 0                                                      # True = ignore that key
        x = self.drop(self._embed(ids, 0, position_ids))
        if self.config.modern:
            bias = self._bias(s, s, x.dtype)
            pad = None if padding is None else torch.zeros(padding.shape, dtype=x.dtype).masked_fill(
                padding, -math.inf)[:, None, None, :]                                # (B, 1, 1, S)
            for block in self.h:
                x = block(x, attn_bias=bias, is_causal=True, attn_mask=pad, positions=position_ids)
            return self.lm_head(self.ln_f(x))                                        # (B, S, V)
        for block in self.h:
            x = block(x, src_mask=causal, src_key_padding_mask=padding, is_causal=True)
        return self.lm_head(self.ln_f(x))                                            # (B, S, V)

    @torch.no_grad()
    def _cached_forward(self, ids, past):
        """The new positions ``ids`` after the cached ones; returns ``(logits, past_key_values)``."""
        past = [] if past is None else past
        p = 0 if not past else past[0][0].shape[-2]
        x = self._embed(ids, p)
        b, s, d = x.shape
        new_past = []
        for i, block in enumerate(self.h):
            attn = block.self_attn
            h, dh = attn.num_heads, d // attn.num_heads
            q, k, v = F.linear(block.norm1(x), attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
            q, k, v = (t.reshape(b, s, h, dh).transpose(1, 2) for t in (q, k, v))    # (B, H, S, Dh)
            if past:
                k, v = torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2)
            new_past.append((k, v))
            allowed = ~torch.ones(s, p + s, dtype=torch.bool).triu(p + 1)            # True = takes part
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)       # (B, H, S, Dh)
            x = x + attn.out_proj(ctx.transpose(1, 2).reshape(b, s, d))
            x = x + block._ff_block(block.norm2(x))
        return self.lm_head(self.ln_f(x)), new_past


def to_torch(model, twin=True):
    """A torch ``GPT`` with ``model``'s configuration, weights and train/eval mode."""
    ref = GPT(model.config, twin=twin)
    ref.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    return ref.train(model.training)


def from_torch(module, seed=None):
    """An ``nt.GPT`` with ``module``'s configuration, weights and train/eval mode."""
    model = nt.GPT(module.config, seed=seed)
    model.load_state_dict({k: v.detach().cpu().numpy() for k, v in module.state_dict().items()})
    return model.train(module.training)


@torch.no_grad()
def greedy(module, ids, max_new_tokens, use_cache=True):
    """Greedy decoding with the torch twin (the benchmark's torch side): (B, S) -> (B, S + max_new_tokens)."""
    module.eval()
    seq = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    new, past = seq, None
    for _ in range(max_new_tokens):
        if use_cache:
            logits, past = module(new, past_key_values=past, use_cache=True)
        else:
            logits = module(seq)
        new = logits[:, -1].argmax(dim=-1, keepdim=True)
        seq = torch.cat([seq, new], dim=1)
    return seq.numpy()

