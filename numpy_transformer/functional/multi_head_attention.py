"""Multi-head attention: project, split heads, attend, merge heads, project (``torch.nn.MultiheadAttention``'s
maths on batch-first inputs), forward and backward."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .attention import scaled_dot_product_attention_backward, scaled_dot_product_attention_forward
from .dtypes import as_scalar
from .linear import LinearCache, linear_backward, linear_forward
from .masks import merge_masks
from .tiled_attention import FlashAttentionCache, flash_attention_backward, flash_attention_forward

__all__ = ["MultiHeadAttentionCache", "split_heads", "merge_heads", "multi_head_attention_forward",
           "multi_head_attention_backward"]


EXTRA_KEYS_CAUSAL = ("is_causal=True cannot be combined with add_bias_kv or add_zero_attn: torch's two code paths "
                     "disagree on whether causality masks the appended keys (its need_weights=False path masks "
                     "them, its attn_mask path does not); pass the causal mask itself as attn_mask, with "
                     "is_causal=False")

class MultiHeadAttentionCache(NamedTuple):
    in_lin: tuple                 # LinearCache of the fused (B, S, 3D) projection, or (q, k, v) LinearCaches
    attn: tuple                   # AttentionCache or FlashAttentionCache, per head on (B, H, S, Dh)
    out_lin: LinearCache          # output projection
    packed: bool                  # q, k, v weights are row-blocks of one in_proj_weight
    fused: bool                   # self-attention: one GEMM made q, k and v
    extra: tuple                  # (bias_kv, add_zero_attn): keys appended after the T projected ones


def split_heads(x, heads):
    """(B, S, D) -> (B, H, S, Dh): a strided view, no data is moved (BLAS reads it with a leading dim)."""
    b, s, d = x.shape
    return x.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)             # (B, H, S, Dh)


def merge_heads(x):
    """(B, H, S, Dh) -> (B, S, D): the transpose *before* the reshape keeps each position's heads together."""
    b, h, s, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * dh)                        # (B, S, D)


def _split_heads_naive(x, heads):
    """The plain reference of :func:`split_heads`: cut D into H slices and stack them (a copy)."""
    return np.stack(np.split(x, heads, axis=-1), axis=1)                        # (B, H, S, Dh)


def _merge_heads_naive(x):
    """The plain reference of :func:`merge_heads`: concatenate the heads along the features (a copy)."""
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)                  # (B, S, D)


def _append_keys(x, bias, add_zero_attn, heads):
    """(B, H, T, Dh) -> (B, H, T+e, Dh): the projected keys (or values), then ``bias`` (1, 1, D) as one
    more position (``add_bias_kv``), then a zero position (``add_zero_attn``), as torch appends them."""
    b, _, _, dh = x.shape
    parts = [x]
    if bias is not None:
        parts.append(np.broadcast_to(bias.reshape(1, heads, 1, dh), (b, heads, 1, dh)))  # (B, H, 1, Dh)
    if add_zero_attn:
        parts.append(np.zeros((b, heads, 1, dh), dtype=x.dtype))                         # (B, H, 1, Dh)
    return np.concatenate(parts, axis=-2)                                                # (B, H, T+e, Dh)


def _pad_keys(mask, extra):
    """A mask with ``extra`` more key columns that mask nothing (False, or 0 added), as torch pads it."""
    if mask is None or extra == 0:
        return mask
    return np.concatenate([mask, np.zeros(mask.shape[:-1] + (extra,), dtype=mask.dtype)], axis=-1)


def multi_head_attention_forward(query, key, value, num_heads, in_proj_weight=None, in_proj_bias=None,
                                 out_proj_weight=None, out_proj_bias=None, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, attn_mask=None,
                                 key_padding_mask=None, is_causal=False, dropout_p=0.0,
                                 training=True, rng=None, dropout_mask=None, attention="standard",
                                 block_size=128, bias_k=None, bias_v=None, add_zero_attn=False):
    """Multi-head attention on batch-first inputs, as ``torch.nn.MultiheadAttention``.

    ``Q = query Wq^T + bq``, ``K = key Wk^T + bk``, ``V = value Wv^T + bv`` (Wq, Wk, Wv the three
    row-blocks of ``in_proj_weight``, or the separate ``*_proj_weight`` when kdim/vdim differ), split into
    H heads of width Dh = D/H, attention per head, heads merged back, then ``out = ctx Wo^T + bo``.

    For self-attention (``query is key is value``) the three projections are one GEMM with the whole
    (3D, D) ``in_proj_weight``; the heads are strided views into its (B, S, 3, H, Dh) result, and each
    head's output is written straight into the (B, S, H, Dh) buffer the output projection reads: no
    split or merge ever copies data.

    Parameters
    ----------
    query : ndarray, shape (B, S, D)
    key : ndarray, shape (B, T, Dk)
    value : ndarray, shape (B, T, Dv)
    num_heads : int
    in_proj_weight : ndarray, shape (3D, D), optional (packed); else ``q/k/v_proj_weight``
    in_proj_bias : ndarray, shape (3D,), optional
    out_proj_weight : ndarray, shape (D, D)
    out_proj_bias : ndarray, shape (D,), optional
    attn_mask, key_padding_mask, is_causal : see :func:`merge_masks`
        The modules' (and ``torch.nn.functional.multi_head_attention_forward``'s) convention: bool
        True = may NOT attend, float added; ``is_causal=True`` alone means the causal mask, with a mask
        it must be the causal mask (a wrong hint is refused).
    dropout_p, training, rng, dropout_mask : attention dropout on the probabilities
    attention : {"standard", "tiled"}
        "tiled" uses :func:`flash_attention_forward` (memory linear in S; no weights returned).
    block_size : int
        Tile size of the tiled path.
    bias_k, bias_v : ndarray, shape (1, 1, D), optional
        ``add_bias_kv``: one more key and value (after the T projected ones) that every query may attend;
        the masks get one more column that masks nothing, as torch pads them.
    add_zero_attn : bool
        One more key and value of zeros after those (masks padded likewise). Neither goes with
        ``is_causal=True`` (refused: torch's code paths disagree on whether causality masks the
        appended keys); pass the causal mask itself as ``attn_mask``.

    Returns
    -------
    out : ndarray, shape (B, S, D)
    probs : ndarray, shape (B, H, S, T'), or None on the tiled path (T' = T + the appended keys)
        The attention weights after dropout (what torch returns as ``attn_output_weights``).
    cache : MultiHeadAttentionCache
    """
    if is_causal and (bias_k is not None or add_zero_attn):
        raise ValueError(EXTRA_KEYS_CAUSAL)
    b, s, d = query.shape
    t = key.shape[1]
    dh = d // num_heads
    packed = in_proj_weight is not None
    fused = packed and query is key and key is value
    if fused:
        qkv, in_lin = linear_forward(query, in_proj_weight, in_proj_bias)       # (B, S, 3D)
        qkv = qkv.reshape(b, s, 3, num_heads, dh)                               # (B, S, 3, H, Dh)
        heads = tuple(qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))     # 3 x (B, H, S, Dh) views
    else:
        if packed:
            wq, wk, wv = in_proj_weight[:d], in_proj_weight[d:2 * d], in_proj_weight[2 * d:]
        else:
            wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
        bq, bk, bv = (None, None, None) if in_proj_bias is None else (
            in_proj_bias[:d], in_proj_bias[d:2 * d], in_proj_bias[2 * d:])
        q, q_lin = linear_forward(query, wq, bq)                                # (B, S, D)
        k, k_lin = linear_forward(key, wk, bk)                                  # (B, T, D)
        v, v_lin = linear_forward(value, wv, bv)                                # (B, T, D)
        in_lin = (q_lin, k_lin, v_lin)
        heads = (split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads))
    if (bias_k is None) != (bias_v is None):
        raise ValueError("bias_k and bias_v go together (add_bias_kv): got only one of them")
    extra = int(bias_k is not None) + int(bool(add_zero_attn))
    if extra:                                             # the appended keys, and masks padded for them
        heads = (heads[0], _append_keys(heads[1], bias_k, add_zero_attn, num_heads),
                 _append_keys(heads[2], bias_v, add_zero_attn, num_heads))          # (B, H, T+e, Dh)
        attn_mask, key_padding_mask = _pad_keys(attn_mask, extra), _pad_keys(key_padding_mask, extra)
    ctx = np.empty((b, s, num_heads, dh), dtype=query.dtype)                     # (B, S, H, Dh)
    ctx_heads = ctx.transpose(0, 2, 1, 3)                                        # (B, H, S, Dh) view
    if attention == "tiled":
        causal_only = is_causal and attn_mask is None       # let the tiles skip the upper triangle
        mask = merge_masks(None if causal_only else attn_mask, key_padding_mask, False if causal_only else is_causal,
                           b, num_heads, s, t + extra, query.dtype)
        _, attn = flash_attention_forward(*heads, attn_mask=mask, is_causal=causal_only, block_q=block_size,
                                          block_k=block_size, dropout_p=dropout_p, training=training, rng=rng,
                                          dropout_mask=dropout_mask, out=ctx_heads)
        probs = None
    elif attention == "standard":
        mask = merge_masks(attn_mask, key_padding_mask, is_causal, b, num_heads, s, t + extra, query.dtype)
        _, attn = scaled_dot_product_attention_forward(*heads, attn_mask=mask, dropout_p=dropout_p,
                                                       training=training, rng=rng, dropout_mask=dropout_mask,
                                                       out=ctx_heads)
        probs = attn.probs if attn.dropout.mask is None else (
            attn.probs * (attn.dropout.mask * as_scalar(attn.dropout.scale, query.dtype)))  # (B, H, S, T)
    else:
        raise ValueError(f"attention must be 'standard' or 'tiled', got {attention!r}")
    out, out_lin = linear_forward(ctx.reshape(b, s, d), out_proj_weight, out_proj_bias)  # (B, S, D)
    extra = (bias_k is not None, bool(add_zero_attn))
    return out, probs, MultiHeadAttentionCache(in_lin, attn, out_lin, packed, fused, extra)


def multi_head_attention_backward(dout, cache, sum_inputs=False, *, record=None):
    """Backward of multi-head attention.  Shapes: dout (B, S, D) -> dquery, dkey, dvalue and weight grads.

    Walk the forward in reverse: the output projection is a linear layer; merging heads is a
    transpose + reshape, so its backward is :func:`split_heads` (the inverse permutation); attention
    per head; splitting heads is undone by :func:`merge_heads`; then the input projections. In the
    fused self-attention case the head gradients are written into one (B, S, 3, H, Dh) buffer, which is
    exactly the gradient of the fused (B, S, 3D) projection output, so ``d in_proj_weight`` is one GEMM.
    When query, key and value are the same array the caller adds the three input gradients: the input
    was used three times. With ``sum_inputs=True`` (self-attention only) that sum is computed directly,
    ``dx = dQKV @ W_in`` in one (N, 3D) x (3D, D) product, and returned as ``dquery`` (``dkey`` and
    ``dvalue`` are None). ``record`` (standard attention only) is handed the attention backward's
    intermediates, see :func:`scaled_dot_product_attention_backward`.

    Returns
    -------
    dquery, dkey, dvalue : ndarray
    grads : dict
        ``in_proj_weight``/``in_proj_bias`` (packed) or ``q_proj_weight``... , ``bias_k``/``bias_v``
        (with ``add_bias_kv``), ``out_proj.weight``,
        ``out_proj.bias`` (keys as torch's parameter names; bias entries absent without bias).
    """
    attn, (bias_kv, zero_attn) = cache.attn, cache.extra
    b, heads, s, dh = attn.q.shape
    d = heads * dh
    t = attn.k.shape[-2] - bias_kv - zero_attn                                   # the projected keys
    dctx, dwo, dbo = linear_backward(dout, cache.out_lin)                        # (B, S, D)
    dctx_heads = dctx.reshape(b, s, heads, dh).transpose(0, 2, 1, 3)             # (B, H, S, Dh) view
    if isinstance(attn, FlashAttentionCache):
        attention_backward = flash_attention_backward
    else:
        def attention_backward(dctx, attn, out=None):
            return scaled_dot_product_attention_backward(dctx, attn, out=out, record=record)
    grads = {}
    if cache.fused:
        dqkv = np.empty((b, s, 3, heads, dh), dtype=dout.dtype)                 # (B, S, 3, H, Dh)
        views = tuple(dqkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))    # 3 x (B, H, S, Dh)
        if bias_kv or zero_attn:              # the appended keys' rows are not in the fused buffer
            dq, dk, dv = attention_backward(dctx_heads, attn)                   # (B, H, S or T+e, Dh)
            _bias_kv_grads(grads, dk, dv, t, bias_kv)
            for view, g in zip(views, (dq, dk[..., :t, :], dv[..., :t, :])):
                view[...] = g
        else:
            attention_backward(dctx_heads, attn, out=views)
        dqkv = dqkv.reshape(b * s, 3 * d)                                        # (N, 3D)
        x, w, has_bias = cache.in_lin
        x2 = x.reshape(-1, x.shape[-1])                                          # (N, D)
        if sum_inputs:                                   # d(x Wq^T + x Wk^T + x Wv^T) / dx in one product
            dquery, dkey, dvalue = (dqkv @ w).reshape(x.shape), None, None                # (B, S, D)
        else:                                            # one gradient per use, through each row-block
            dquery, dkey, dvalue = ((dqkv[:, i * d:(i + 1) * d] @ w[i * d:(i + 1) * d]).reshape(x.shape)
                                    for i in range(3))
        grads["in_proj_weight"] = dqkv.T @ x2                                    # (3D, D) one GEMM
        if has_bias:
            grads["in_proj_bias"] = dqkv.sum(axis=0)                             # (3D,)
    else:
        dq, dk, dv = attention_backward(dctx_heads, attn)                       # (B, H, S or T+e, Dh)
        if bias_kv or zero_attn:
            _bias_kv_grads(grads, dk, dv, t, bias_kv)
            dk, dv = dk[..., :t, :], dv[..., :t, :]                              # (B, H, T, Dh)
        q_lin, k_lin, v_lin = cache.in_lin
        dquery, dwq, dbq = linear_backward(merge_heads(dq), q_lin)              # (B, S, D)
        dkey, dwk, dbk = linear_backward(merge_heads(dk), k_lin)                # (B, T, Dk)
        dvalue, dwv, dbv = linear_backward(merge_heads(dv), v_lin)              # (B, T, Dv)
        if cache.packed:
            grads["in_proj_weight"] = np.concatenate([dwq, dwk, dwv], axis=0)    # (3D, D)
        else:
            grads.update(q_proj_weight=dwq, k_proj_weight=dwk, v_proj_weight=dwv)
        if dbq is not None:
            grads["in_proj_bias"] = np.concatenate([dbq, dbk, dbv])              # (3D,)
    grads["out_proj.weight"] = dwo
    if dbo is not None:
        grads["out_proj.bias"] = dbo
    return dquery, dkey, dvalue, grads


def _bias_kv_grads(grads, dk, dv, t, bias_kv):
    """``bias_k`` is key position T of every batch element (the zero key, if any, has no parameter):
    its gradient is that position's head gradients summed over the batch, heads merged back to D."""
    if bias_kv:
        b, h, _, dh = dk.shape
        grads["bias_k"] = dk[..., t, :].sum(axis=0).reshape(1, 1, h * dh)           # (1, 1, D)
        grads["bias_v"] = dv[..., t, :].sum(axis=0).reshape(1, 1, h * dh)           # (1, 1, D)
