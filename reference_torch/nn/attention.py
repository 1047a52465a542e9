"""Twin of ``numpy_transformer/nn/attention.py``: ``MultiheadAttention`` written out step by step, and
the attention maths it runs (masks, scores, softmax, dropout), which the other attention twins share.

``MultiheadAttention`` mirrors ``torch.nn.MultiheadAttention`` (``state_dict`` keys ``in_proj_weight``,
``in_proj_bias``, ``out_proj.weight``, ``out_proj.bias``, or ``q/k/v_proj_weight``; ``bias_k``,
``bias_v``), with ``batch_first=True`` by default (as ``numpy_transformer``).

Masks
-----
As ``torch.nn.MultiheadAttention`` (and ``numpy_transformer``'s modules): a **bool** mask is True where
a query may **not** attend (``torch.nn.functional.scaled_dot_product_attention`` reads a bool mask the
other way round); a **float** mask is added to the scores. ``attn_mask`` is (S, T) or (B*H, S, T),
``key_padding_mask`` is (B, T). ``is_causal=True`` with no ``attn_mask`` applies the causal mask; with
one it is only a hint (the given mask is used; ``numpy_transformer`` refuses a wrong hint). A query row
whose keys are all masked outputs zeros (``torch.nn`` would give NaN there; ``numpy_transformer`` and
``torch.nn.functional.scaled_dot_product_attention`` give zeros).

Shape letters: B batch, S query length, T key length, D model width, H heads, Dh = D/H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .layers import dropout
from .module import ReferenceModule, as_tensor

__all__ = ["causal_mask", "additive_mask", "merge_masks", "attention", "MultiheadAttention"]


def causal_mask(s, t=None, device=None):
    """Bool (S, T), True above the diagonal: query i may not attend to key j > i."""
    t = s if t is None else t
    return torch.ones(s, t, dtype=torch.bool, device=device).triu(1)


def additive_mask(mask, dtype):
    """A bool mask (True = may not attend) as 0 / -inf, or a float mask as is, in ``dtype``."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.to(dtype)


def merge_masks(attn_mask, key_padding_mask, is_causal, batch, heads, s, t, dtype, device=None):
    """One additive mask broadcastable to (B, H, S, T) from ``attn_mask``, ``key_padding_mask`` and
    ``is_causal`` (used only when ``attn_mask`` is None); None when nothing is masked."""
    attn_mask = as_tensor(attn_mask, device=device)
    key_padding_mask = as_tensor(key_padding_mask, device=device)
    if attn_mask is None and is_causal:
        attn_mask = causal_mask(s, t, device=device)
    out = None
    if attn_mask is not None:
        if tuple(attn_mask.shape) == (s, t):
            out = additive_mask(attn_mask, dtype)                                     # (S, T)
        elif tuple(attn_mask.shape) == (batch * heads, s, t):
            out = additive_mask(attn_mask, dtype).view(batch, heads, s, t)            # (B, H, S, T)
        else:
            raise ValueError(f"attn_mask must have shape {(s, t)} or {(batch * heads, s, t)}, got "
                             f"{tuple(attn_mask.shape)}")
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (batch, t):
            raise ValueError(f"key_padding_mask must have shape {(batch, t)}, got {tuple(key_padding_mask.shape)}")
        kp = additive_mask(key_padding_mask, dtype).view(batch, 1, 1, t)            # (B, 1, 1, T)
        out = kp if out is None else out + kp
    return out


def attention(q, k, v, mask=None, dropout_p=0.0, training=True, dropout_mask=None, scale=None):
    """``dropout(softmax(q k^T * scale + mask)) v``, rows with every key masked giving zeros.

    Parameters
    ----------
    q : (..., S, Dh);  k : (..., T, Dh);  v : (..., T, Dv)
    mask : additive float mask broadcastable to (..., S, T), or None
    dropout_mask : bool keep-mask (..., S, T) to replay, or None

    Returns
    -------
    out : (..., S, Dv)
    probs : (..., S, T), the attention weights after dropout
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale                                          # (..., S, T)
    if mask is not None:
        scores = scores + mask
    dead = torch.isneginf(scores).all(dim=-1, keepdim=True)                           # (..., S, 1) no key left
    probs = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    if training and dropout_p > 0.0:
        probs = dropout(probs, dropout_p, dropout_mask)
    return probs @ v, probs


class MultiheadAttention(ReferenceModule):
    """Multi-head attention written out by hand, with ``torch.nn.MultiheadAttention``'s parameters.

    ``Q = query Wq^T + bq``, ``K = key Wk^T + bk``, ``V = value Wv^T + bv``; each split into H heads
    of width Dh = D/H (``view`` + ``transpose``); per head ``softmax(Q K^T / sqrt(Dh) + mask)``,
    dropout on the probabilities, times V; heads merged back and ``out = ctx Wo^T + bo``.

    With ``add_bias_kv`` the learned ``bias_k``/``bias_v`` (1, 1, D) are appended to the projected keys and
    values as one more position, with ``add_zero_attn`` a zero position after that; the masks get one
    column each that masks nothing (torch's ``pad(mask, (0, 1))``). Unbatched inputs (S, D) are run as
    a batch of one.

    Parameters
    ----------
    embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim
        As ``torch.nn.MultiheadAttention`` (parameter names too: ``in_proj_weight`` (3D, D) or
        ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when kdim/vdim differ from D; ``bias_k``,
        ``bias_v``).
    batch_first : bool
        True (default, as ``numpy_transformer``): (B, S, D) inputs; False: (S, B, D).
    """

    replays_attention_dropout = True        # set_dropout_masks addresses it by its own name

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=True, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim must be divisible by num_heads, got {embed_dim} and {num_heads}")
        kw = dict(device=device, dtype=dtype)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.dropout = float(dropout)          # a float, as in torch.nn.MultiheadAttention
        self.dropout_mask = None               # replayed keep-mask (B, H, S, T), see set_dropout_masks
        d = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(d, d, **kw))
            self.k_proj_weight = nn.Parameter(torch.empty(d, self.kdim, **kw))
            self.v_proj_weight = nn.Parameter(torch.empty(d, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * d, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(d, d, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, d, **kw))
            self.bias_v = nn.Parameter(torch.empty(1, 1, d, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """torch's initialisation: Xavier-uniform projections, zero biases."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                nn.init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
            nn.init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                nn.init.xavier_normal_(b)

    def _projection_weights(self):
        if self.in_proj_weight is not None:
            return self.in_proj_weight.chunk(3, dim=0)                                 # 3 x (D, D)
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Returns ``(out, weights)``: out shaped like ``query``; weights (B, S, T) averaged over heads,
        (B, H, S, T) when ``average_attn_weights`` is False, None without ``need_weights``."""
        unbatched = query.dim() == 2
        if unbatched:                                    # a batch of one, batch-first
            query, key, value = query[None], key[None], value[None]
            key_padding_mask = None if key_padding_mask is None else as_tensor(key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = (a.transpose(0, 1) for a in (query, key, value))
        b, s, d = query.shape
        t = key.shape[1]
        h, dh = self.num_heads, self.head_dim
        wq, wk, wv = self._projection_weights()
        bq, bk, bv = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q = F.linear(query, wq, bq)                                                    # (B, S, D)
        k = F.linear(key, wk, bk)                                                      # (B, T, D)
        v = F.linear(value, wv, bv)                                                    # (B, T, D)
        q = q.view(b, s, h, dh).transpose(1, 2)                                        # (B, H, S, Dh)
        k = k.view(b, t, h, dh).transpose(1, 2)                                        # (B, H, T, Dh)
        v = v.view(b, t, h, dh).transpose(1, 2)                                        # (B, H, T, Dh)
        mask = merge_masks(attn_mask, key_padding_mask, is_causal, b, h, s, t, query.dtype, query.device)
        extra = []                                                                     # appended keys
        if self.bias_k is not None:
            extra.append((self.bias_k.view(1, h, 1, dh).expand(b, h, 1, dh),
                           self.bias_v.view(1, h, 1, dh).expand(b, h, 1, dh)))
        if self.add_zero_attn:
            zeros = torch.zeros(b, h, 1, dh, dtype=k.dtype, device=k.device)
            extra.append((zeros, zeros))
        if extra:
            k = torch.cat([k] + [e[0] for e in extra], dim=2)                          # (B, H, T+e, Dh)
            v = torch.cat([v] + [e[1] for e in extra], dim=2)                          # (B, H, T+e, Dh)
            if mask is not None:                                                       # attend them freely
                mask = F.pad(mask, (0, len(extra)))
        ctx, probs = attention(q, k, v, mask, self.dropout, self.training, self.dropout_mask)  # (B, H, S, Dh)
        ctx = ctx.transpose(1, 2).reshape(b, s, d)                                     # (B, S, D)
        out = self.out_proj(ctx)                                                       # (B, S, D)
        weights = None
        if need_weights:
            weights = probs.mean(dim=1) if average_attn_weights else probs             # (B, S, T) | (B, H, S, T)
        if unbatched:
            return out[0], None if weights is None else weights[0]
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"kdim={self.kdim}, vdim={self.vdim}, batch_first={self.batch_first}")
