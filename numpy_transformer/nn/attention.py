""":class:`MultiheadAttention`, as ``torch.nn.MultiheadAttention``: packed or separate input
projections, ``add_bias_kv``/``add_zero_attn``, batched or unbatched inputs, bool/float masks (torch's
module convention), attention dropout with a replayable mask, and the "standard" or "tiled"
(online-softmax) computation from :mod:`numpy_transformer.functional`.
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..utils.checks import as_generator, check_float_input, check_mask, check_positive_int, check_probability
from . import hooks
from ._init import dtype_of, xavier_normal, xavier_uniform
from ._layout import BatchLayout
from .layers import Linear
from .module import Module, Parameter

__all__ = ["MultiheadAttention"]


def _data(param):
    """A parameter's array, or None for a parameter the module does not have (``bias=False``, ...)."""
    return None if param is None else param.data


class MultiheadAttention(Module):
    """Multi-head attention, as ``torch.nn.MultiheadAttention`` (same parameters, masks and outputs).

    Parameters
    ----------
    embed_dim : int
        D. Must be divisible by ``num_heads``.
    num_heads : int
        H; each head has width Dh = D / H.
    dropout : float
        Dropout on the attention probabilities (train mode only).
    bias : bool
        Biases on the input and output projections.
    add_bias_kv : bool
        Learned ``bias_k``/``bias_v`` parameters (1, 1, D) (torch's init, Xavier-normal): appended to the
        projected keys and values as one more position every query may attend (the masks are padded
        with one column that masks nothing, as torch pads them).
    add_zero_attn : bool
        One more key and value of zeros after those (masks padded likewise).
    kdim, vdim : int, optional
        Feature sizes of key and value (default D). When they differ from D the projections are the
        separate ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight`` instead of the packed
        ``in_proj_weight`` (3D, D), as in torch.
    batch_first : bool
        True (our default): inputs are (B, S, D); False: (S, B, D), torch's default.
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        For the initialisation and the dropout masks.
    attention : {"standard", "tiled"}
        "tiled" computes attention by tiles with an online softmax (memory linear in S, see
        :func:`numpy_transformer.functional.flash_attention_forward`); it returns no weights, so it
        needs ``need_weights=False``.
    block_size : int
        Tile size of the tiled path.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=True, dtype=np.float32, seed=None, attention="standard",
                 block_size=128):
        super().__init__()
        if attention not in ("standard", "tiled"):
            raise ValueError(f"attention must be 'standard' or 'tiled', got {attention!r}")
        self.attention = attention
        self.block_size = check_positive_int(block_size, "block_size")
        self.embed_dim = check_positive_int(embed_dim, "embed_dim")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} ({embed_dim} % {num_heads} = {embed_dim % num_heads})")
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else check_positive_int(kdim, "kdim")
        self.vdim = embed_dim if vdim is None else check_positive_int(vdim, "vdim")
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout = check_probability(dropout)
        self.batch_first = bool(batch_first)
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        d = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(xavier_uniform(rng, (3 * d, d), self.dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(xavier_uniform(rng, (d, d), self.dtype))
            self.k_proj_weight = Parameter(xavier_uniform(rng, (d, self.kdim), self.dtype))
            self.v_proj_weight = Parameter(xavier_uniform(rng, (d, self.vdim), self.dtype))
        self.register_parameter("in_proj_bias", Parameter(np.zeros(3 * d, dtype=self.dtype)) if bias else None)
        self.out_proj = Linear(d, d, bias=bias, dtype=self.dtype, seed=rng)
        if bias:
            self.out_proj.bias.data[...] = 0
        if add_bias_kv:
            self.bias_k = Parameter(xavier_normal(rng, (1, 1, d), self.dtype))
            self.bias_v = Parameter(xavier_normal(rng, (1, 1, d), self.dtype))
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self.add_zero_attn = bool(add_zero_attn)
        self.rng = rng.spawn(1)[0]                      # attention-dropout masks
        self.last_mask = None

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Attention of ``query`` over ``key``/``value``.

        Masks follow torch's modules: a **bool** mask is True where a query may **not** attend (the
        opposite of ``scaled_dot_product_attention``'s bool mask, which is True where it may; the
        conversion happens inside, :func:`numpy_transformer.functional.module_to_sdpa_mask`), a **float**
        mask is added to the scores. A query row with every key masked outputs zeros (torch: NaN).

        Parameters
        ----------
        query : ndarray, (B, S, D) if batch_first else (S, B, D); or unbatched (S, D)
        key : ndarray, (B, T, kdim) if batch_first else (T, B, kdim); or unbatched (T, kdim)
        value : ndarray, (B, T, vdim) if batch_first else (T, B, vdim); or unbatched (T, vdim)
        key_padding_mask : ndarray (B, T) (unbatched: (T,)), bool (True = ignore that key) or float
            (added), optional
        need_weights : bool
            Return the attention weights (after dropout, as torch).
        attn_mask : ndarray (S, T) or (B*H, S, T) (unbatched: (S, T) or (H, S, T)), bool (True = may
            not attend) or float (added), optional
        average_attn_weights : bool
            Average the weights over heads: (B, S, T); else (B, H, S, T) (unbatched: no B axis).
        is_causal : bool
            A hint that ``attn_mask`` is the causal mask, as torch; a wrong hint (``attn_mask`` given and
            not the causal mask) raises ValueError (torch would use the hint in some code paths and the
            mask in others). **Difference from torch:** ``is_causal=True`` with no ``attn_mask`` applies
            the causal mask (torch raises "Need attn_mask if specifying the is_causal hint"). With
            ``add_bias_kv``/``add_zero_attn`` it is refused (ValueError): torch's hint path (no
            ``need_weights``, no ``key_padding_mask``) masks the appended keys causally, its mask path
            does not, so torch has two answers; pass the causal mask as ``attn_mask`` instead.

        Returns
        -------
        out : ndarray, shaped like ``query``
        weights : ndarray or None
            (B, S, T') or (B, H, S, T') with T' = T + the appended keys.
        """
        bf = "(B, S, D)" if self.batch_first else "(S, B, D)"
        query = check_float_input(query, "query", self.dtype, ndim=(2, 3), last_dim=self.embed_dim,
                                  shape_doc=bf + " or unbatched (S, D)")
        layout = BatchLayout.of(query, self.batch_first)
        nd = 2 if layout.unbatched else 3
        doc = "(T, kdim) like an unbatched query" if layout.unbatched else bf
        key = check_float_input(key, "key", self.dtype, ndim=nd, last_dim=self.kdim, shape_doc=doc)
        value = check_float_input(value, "value", self.dtype, ndim=nd, last_dim=self.vdim, shape_doc=doc)
        query, key, value = layout.to_batch_first(query, key, value)   # (B, S, D), (B, T, kdim), (B, T, vdim)
        b, s, _ = query.shape
        t = key.shape[1]
        if layout.unbatched:              # the masks of one batch element (torch's unbatched shapes)
            key_padding_mask = check_mask(key_padding_mask, "key_padding_mask", [(t,)], self.dtype)
            key_padding_mask = layout.add_batch(key_padding_mask)                # (1, T)
            attn_mask = check_mask(attn_mask, "attn_mask", [(s, t), (self.num_heads, s, t)], self.dtype)
        if b == 0 or s == 0 or t == 0:
            raise ValueError(f"attention needs a non-empty batch and sequences, got query {query.shape} and "
                             f"key {key.shape} (batch_first={self.batch_first})")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != b:
            raise ValueError(f"key and value must share batch and length with query's batch {b}: got query "
                             f"{query.shape}, key {key.shape}, value {value.shape} (batch_first={self.batch_first})")
        if need_weights and self.attention == "tiled":
            raise ValueError("attention='tiled' never forms the attention weights: call with need_weights=False "
                             "(or build the module with attention='standard')")
        if not layout.unbatched:
            key_padding_mask = check_mask(key_padding_mask, "key_padding_mask", [(b, t)], self.dtype)
            attn_mask = check_mask(attn_mask, "attn_mask", [(s, t), (b * self.num_heads, s, t)], self.dtype)
        if is_causal and (self.bias_k is not None or self.add_zero_attn):
            raise ValueError(F.multi_head_attention.EXTRA_KEYS_CAUSAL)
        F.check_causal_hint(attn_mask, is_causal, "attn_mask", s, t)
        out, probs, cache = F.multi_head_attention_forward(
            query, key, value, self.num_heads,
            in_proj_weight=_data(self.in_proj_weight),
            in_proj_bias=_data(self.in_proj_bias),
            out_proj_weight=self.out_proj.weight.data,
            out_proj_bias=_data(self.out_proj.bias),
            q_proj_weight=_data(self.q_proj_weight),
            k_proj_weight=_data(self.k_proj_weight),
            v_proj_weight=_data(self.v_proj_weight),
            attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
            dropout_p=self.dropout, training=self.training, rng=self.rng, attention=self.attention,
            block_size=self.block_size, bias_k=_data(self.bias_k),
            bias_v=_data(self.bias_v), add_zero_attn=self.add_zero_attn)
        self.last_mask = cache.attn.dropout.mask if self.attention == "standard" else None
        if hooks.active() and self.attention == "standard":
            hooks.attention(self, cache)
        self._save((cache, out.shape, layout))
        weights = None
        if need_weights:
            weights = probs.mean(axis=1) if average_attn_weights else probs       # (B, S, T) or (B, H, S, T)
        return layout.from_batch_first(out), layout.drop_batch(weights)

    def backward(self, dout, sum_inputs=False):
        """dout shaped like the output -> (dquery, dkey, dvalue); accumulates every parameter's grad.

        For self-attention (the same array as query, key and value) the input's gradient is the sum of
        the three. ``sum_inputs=True`` returns that sum alone (one matrix product instead of three and
        two additions; what :class:`TransformerEncoderLayer` uses); it requires the forward to have been
        self-attention.
        """
        cache, shape, layout = self._take()
        dout = layout.grad_to_batch_first(dout, shape, self.dtype)               # (B, S, D)
        if sum_inputs and not cache.fused:
            raise ValueError("sum_inputs=True needs a self-attention forward (the same array as query, key "
                             "and value)")
        record = hooks.attention_recorder(self) if hooks.active() and self.attention == "standard" else None
        dq, dk, dv, grads = F.multi_head_attention_backward(dout, cache, sum_inputs=sum_inputs, record=record)
        for name, g in grads.items():
            owner, _, leaf = name.rpartition(".")
            mod = self.out_proj if owner == "out_proj" else self
            # a dict lookup, not getattr: CPython's attribute cache would keep every fresh name string
            mod._parameters[leaf].accumulate(g, owned=True)
        return layout.from_batch_first(dq) if sum_inputs else layout.from_batch_first(dq, dk, dv)

    def extra_repr(self):
        extra = (", add_bias_kv=True" if self.bias_k is not None else "") + (
            ", add_zero_attn=True" if self.add_zero_attn else "")
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}{extra}"
