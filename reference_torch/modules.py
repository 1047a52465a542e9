"""PyTorch twins of ``numpy_transformer``'s modules, written out step by step; autograd gives the gradients.

These are the *oracle*: plain, readable PyTorch with no hand-written backward. Each twin keeps the
parameter names (``state_dict`` keys) of the ``torch.nn`` module it mirrors, so weights move between
``numpy_transformer``, these twins and ``torch.nn`` without renaming:

=============================  =====================================  ===================================
twin                           mirrors                                ``state_dict`` keys
=============================  =====================================  ===================================
``TokenEmbedding``             ``nt.TokenEmbedding``                  ``embedding.weight``
``PositionalEncoding``         ``nt.PositionalEncoding``              (none: ``pe`` is a non-persistent buffer)
``Dropout``                    ``torch.nn.Dropout``                   (none)
``MultiheadAttention``         ``torch.nn.MultiheadAttention``        ``in_proj_weight``, ``in_proj_bias``,
                                                                      ``out_proj.weight``, ``out_proj.bias``
                                                                      (or ``q/k/v_proj_weight``)
``FeedForward``                the feed-forward half of a layer       ``linear1.*``, ``linear2.*``
``TransformerEncoderLayer``    ``torch.nn.TransformerEncoderLayer``   ``self_attn.*``, ``linear1.*``,
                                                                      ``linear2.*``, ``norm1.*``, ``norm2.*``
``TransformerEncoder``         ``torch.nn.TransformerEncoder``        ``layers.{i}.*``, ``norm.*``
=============================  =====================================  ===================================

Each twin has the name of the ``torch.nn`` module it mirrors (and of the ``numpy_transformer``
module it checks); the constructors take torch's arguments, except ``batch_first=True`` by default
and ``TransformerEncoder(layers, norm)`` taking a list (``TransformerEncoder.stack(layer, n)`` for
torch's copy-one-layer form). :func:`activation` turns ``"relu"``/``"gelu"``/a callable/an
``nt.ReLU``/``nt.GELU`` module into the torch function.

Dropout replay
--------------
``numpy_transformer`` draws its dropout masks from NumPy generators; ``nt.dropout_masks(module)``
returns them as ``{module name: bool keep-mask}`` (``'dropout1'``, ``'self_attn'`` for the
attention-probability dropout, ``'layers.0.dropout'`` ...). Hand that dict to
:meth:`ReferenceModule.set_dropout_masks` (or :func:`set_dropout_masks`) and every twin applies
exactly the same masks as ``out = x * (mask * 1/(1-p))``, so gradients can be compared with dropout
active. Without a mask a twin draws one with torch's generator, like ``torch.nn.Dropout``.

Masks (attention)
-----------------
As ``torch.nn.MultiheadAttention`` (and ``numpy_transformer``'s modules): a **bool** mask is True where
a query may **not** attend (``torch.nn.functional.scaled_dot_product_attention`` reads a bool mask the
other way round); a **float** mask is added to the scores. ``attn_mask`` is (S, T) or (B*H, S, T),
``key_padding_mask`` is (B, T). ``is_causal=True`` with no ``attn_mask`` applies the causal mask; with
one it is only a hint (the given mask is used; ``numpy_transformer`` refuses a wrong hint). A query row whose keys are all masked outputs zeros
(``torch.nn`` would give NaN there; ``numpy_transformer`` and
``torch.nn.functional.scaled_dot_product_attention`` give zeros).

Shape letters: B batch, S query length, T key length, D model width, H heads, Dh = D/H,
F feed-forward width, V vocabulary.
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Mapping, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import numpy_transformer as nt

__all__ = [
    "ReferenceModule", "Dropout", "TokenEmbedding", "PositionalEncoding", "MultiheadAttention",
    "FeedForward", "TransformerEncoderLayer", "TransformerEncoder", "activation", "dropout", "causal_mask",
    "additive_mask", "merge_masks", "attention", "feed_forward", "sinusoidal_table", "set_dropout_masks",
    "clear_dropout_masks", "LearnedPositionalEmbedding",
]


# --------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------

def _tensor(x, device=None, dtype=None):
    """``x`` (ndarray, tensor or None) as a tensor; NumPy arrays are converted without changing dtype."""
    if x is None:
        return None
    if not isinstance(x, torch.Tensor):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if device is not None or dtype is not None:
        x = x.to(device=device, dtype=dtype if dtype is not None else x.dtype)
    return x


def _mask_tensor(mask, like):
    """A keep-mask (ndarray or tensor) as a bool tensor on ``like``'s device, checked against its shape."""
    m = _tensor(mask, device=like.device)
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


class ReferenceModule(nn.Module):
    """Base of the twins: adds dropout-mask replay to ``nn.Module``."""

    def set_dropout_masks(self, masks: Optional[Mapping], strict: bool = True):
        """Use ``masks`` (``{module name: bool keep-mask}``, as ``nt.dropout_masks``) from now on.

        See :func:`set_dropout_masks`. Returns ``self``.
        """
        set_dropout_masks(self, masks, strict=strict)
        return self

    def clear_dropout_masks(self):
        """Forget replayed masks: dropout draws fresh masks with torch's generator again."""
        clear_dropout_masks(self)
        return self


class Dropout(ReferenceModule):
    """``torch.nn.Dropout`` that can replay a given keep-mask (``self.mask``); identity in eval mode."""

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


def _replay_targets(module):
    """``{name: module}`` of every sub-module that applies dropout (Dropout twins and attention)."""
    return {name: m for name, m in module.named_modules()
            if isinstance(m, (Dropout, MultiheadAttention)) or getattr(m, "replays_attention_dropout", False)}


def set_dropout_masks(module: nn.Module, masks: Optional[Mapping], strict: bool = True):
    """Make every dropout inside ``module`` replay the matching keep-mask of ``masks``.

    Parameters
    ----------
    module : nn.Module
        A twin (or a tree containing twins).
    masks : dict ``{name: bool ndarray or tensor}`` or None
        Names as ``module.named_modules()`` (the same names ``nt.dropout_masks`` uses, since the twins
        have the NumPy modules' layout). A ``MultiheadAttention``'s own name addresses its
        attention-probability dropout, shape (B, H, S, T). Dropouts not named get no mask (they draw
        fresh ones); ``None`` clears every mask.
    strict : bool
        Raise ``KeyError`` for a name that is no dropout of ``module`` (a typo would otherwise leave
        dropout drawing random masks and the comparison failing far from the cause).
    """
    targets = _replay_targets(module)
    masks = {} if masks is None else dict(masks)
    unknown = sorted(set(masks) - set(targets))
    if strict and unknown:
        raise KeyError(f"dropout masks for unknown modules {unknown}; this module's dropouts are "
                       f"{sorted(targets)}")
    for name, m in targets.items():
        mask = masks.get(name)
        mask = None if mask is None else _tensor(mask)
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"masks[{name!r}] must be a bool keep-mask, got dtype {mask.dtype}")
        if isinstance(m, Dropout):
            m.mask = mask
        else:
            m.dropout_mask = mask


def clear_dropout_masks(module: nn.Module):
    """Remove every replayed mask inside ``module``."""
    set_dropout_masks(module, None)


# --------------------------------------------------------------------------------------------------
# embeddings
# --------------------------------------------------------------------------------------------------

class TokenEmbedding(ReferenceModule):
    """``embedding(ids) * sqrt(d_model)`` (the twin of ``nt.TokenEmbedding``)."""

    def __init__(self, vocab_size, d_model, device=None, dtype=None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, device=device, dtype=dtype)

    def forward(self, ids):
        """ids (B, S) int -> (B, S, D)."""
        return self.embedding(_tensor(ids, device=self.embedding.weight.device)) * math.sqrt(self.d_model)


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


# --------------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------------

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
    attn_mask = _tensor(attn_mask, device=device)
    key_padding_mask = _tensor(key_padding_mask, device=device)
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
            key_padding_mask = None if key_padding_mask is None else _tensor(key_padding_mask)[None]
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


# --------------------------------------------------------------------------------------------------
# feed-forward, encoder block, encoder
# --------------------------------------------------------------------------------------------------

# "gelu_new": Hugging Face GPT-2's name for the tanh GELU (nt.GPTConfig's ffn="gelu_new")
_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu,
                "gelu_new": functools.partial(F.gelu, approximate="tanh")}


def activation(spec):
    """The torch function for an activation ``spec``, the one place the torch side resolves one.

    ``spec`` is ``"relu"`` (``F.relu``), ``"gelu"`` (``F.gelu``, exact), ``"silu"`` (``F.silu``), a
    ``numpy_transformer`` activation module (``nt.ReLU``; ``nt.GELU``, honouring its ``approximate``;
    ``nt.SiLU``), or any other callable
    (returned as is: a torch function or ``torch.nn`` module).
    """
    if isinstance(spec, nt.Module):                 # before callable(): nt modules are callable too
        if isinstance(spec, nt.ReLU):
            return F.relu
        if isinstance(spec, nt.GELU):
            return F.gelu if spec.approximate == "none" else functools.partial(F.gelu, approximate=spec.approximate)
        if isinstance(spec, nt.SiLU):
            return F.silu
        raise TypeError(f"no torch function for the activation module {type(spec).__name__}")
    if isinstance(spec, str):
        if spec in _ACTIVATIONS:
            return _ACTIVATIONS[spec]
    elif callable(spec):
        return spec
    raise ValueError(f"activation must be 'relu', 'gelu', 'silu', an nt.ReLU/nt.GELU/nt.SiLU module or a callable, got {spec!r}")


_activation = activation   # for the constructors below, whose ``activation`` argument shadows the function


def feed_forward(x, linear1, activation, dropout_module, linear2):
    """``linear2(dropout(activation(linear1(x))))``: (..., D) -> (..., F) -> (..., D)."""
    return linear2(dropout_module(activation(linear1(x))))


class FeedForward(ReferenceModule):
    """The position-wise feed-forward network ``linear2(dropout(activation(linear1(x))))``.

    ``TransformerEncoderLayer`` runs the same :func:`feed_forward` on its own ``linear1``/``linear2`` (so
    its ``state_dict`` keys stay those of ``torch.nn.TransformerEncoderLayer``).
    """

    def __init__(self, d_model, dim_feedforward=2048, dropout=0.1, activation="relu", bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.activation = _activation(activation)

    def forward(self, x):
        return feed_forward(x, self.linear1, self.activation, self.dropout, self.linear2)


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
        self.activation = _activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (B, S, D) (or (S, B, D) when not batch_first; or unbatched (S, D)) -> same shape."""
        unbatched = src.dim() == 2
        if unbatched:                                                                  # a batch of one
            x = src[None]
            src_key_padding_mask = None if src_key_padding_mask is None else _tensor(src_key_padding_mask)[None]
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


def _is_causal_mask(mask):
    """Whether ``mask`` is the (S, S) causal mask (bool True above the diagonal, or float -inf/0)."""
    if mask is None:
        return False
    mask = _tensor(mask)
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
            is_causal = _is_causal_mask(mask)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        if self.norm is not None:
            x = self.norm(x)
        return x
