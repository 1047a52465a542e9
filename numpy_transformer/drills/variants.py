"""Configurable implementations of every drill, used to recognise the classic mistakes.

Each ``*_impl(**knobs)`` returns a namespace with the exercise's functions (same names and signatures
as the skeleton). With the default knobs the namespace is *correct* (a test grades it and it must pass);
each mistake in :mod:`numpy_transformer.drills.exercises` is a set of knob values that reproduces one
classic error, forward and backward consistently, the way a person making that error would write it.

The grader runs these variants on the cases where a user's array is wrong and reports the variant whose
output the user's output matches. They are deliberately written independently of
:mod:`numpy_transformer.functional` (the verified reference the grader compares against).

The families by file (all re-exported here, so ``V.attention_impl`` works): :mod:`.variants_basic`
(softmax, norms, rope, GELU, linear, embedding, cross-entropy, positional encoding),
:mod:`.variants_attention` (attention, multi-head attention, the encoder layer, the KV cache, cross
attention, flash attention's backward), :mod:`.variants_decoder`, :mod:`.variants_positions` (ALiBi,
learned positions), :mod:`.variants_training` (dropout, cross-entropy's options, AdamW); grouped-query
attention, T5's relative bias, SiLU and SwiGLU are here.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .variants_attention import (_attend, _attend_backward, _causal, _scale_value, attention_impl,
                                 cross_attention_impl, encoder_layer_impl, flash_backward_impl,
                                 kv_cache_impl, mha_impl)
from .variants_basic import (cross_entropy_impl, embedding_impl, gelu_impl, layer_norm_impl, linear_impl,
                             positional_encoding_impl, rms_norm_impl, rope_impl, softmax_impl)
from .variants_decoder import decoder_layer_impl
from .variants_positions import alibi_impl, learned_positions_impl
from .variants_training import adamw_impl, cross_entropy_options_impl, dropout_impl


def gqa_impl(mapping="interleave", reduce="sum", scale="sqrt", backward="correct"):
    """Grouped-query attention, by repeating k and v to the query's heads explicitly.

    ``mapping``: "interleave" (correct: query head h uses key/value head h // G, torch's
    ``repeat_interleave``) or "modulo" (head h % Hkv: the heads tiled, ``np.tile``); ``reduce``: how a
    shared head collects the gradients of its G copies: "sum" (correct), "mean", "first" (one member's)."""

    def expand(x, g):                                     # (B, Hkv, T, X) -> (B, Hkv * G, T, X)
        return np.repeat(x, g, axis=1) if mapping == "interleave" else np.tile(x, (1, g, 1, 1))

    def collect(dx, hkv):                                 # (B, Hkv * G, T, X) -> (B, Hkv, T, X)
        b, hq, t, d = dx.shape
        g = hq // hkv
        if mapping == "interleave":
            per = dx.reshape(b, hkv, g, t, d)             # (B, Hkv, G, T, X): the copies of each head
        else:
            per = dx.reshape(b, g, hkv, t, d).swapaxes(1, 2)
        if reduce == "mean":
            return per.mean(axis=2)
        return per[:, :, 0] if reduce == "first" else per.sum(axis=2)

    def gqa_forward(q, k, v, causal=False):
        g = q.shape[1] // k.shape[1]
        blocked = _causal(q.shape[-2], k.shape[-2], "triu") if causal else None
        out, cache = _attend(q, expand(k, g), expand(v, g), blocked, _scale_value(scale, q.shape[-1]), -1,
                             "before", "no_rowsum" if backward == "no_rowsum" else "correct")
        return out, (cache, k.shape[1])

    def gqa_backward(dout, cache):
        cache, hkv = cache
        dq, dk, dv = _attend_backward(dout, cache)
        return dq, collect(dk, hkv), collect(dv, hkv)

    return SimpleNamespace(gqa_forward=gqa_forward, gqa_backward=gqa_backward)


# --------------------------------------------------------------------------------------------------
# relative position bias (T5)
# --------------------------------------------------------------------------------------------------


def relative_position_bias_impl(backward="add_at", relative="key_minus_query", split="half"):
    """``backward``: "add_at" or "fancy_index" (repeated buckets lose gradient); ``relative``:
    "key_minus_query" or "query_minus_key" (the sign flipped: past and future swapped); ``split``:
    "half" (correct), "shared" (bidirectional without a separate future half: past and future keys at
    one distance share a bucket), "no_halving" (the future offset by num_buckets // 2 but each half
    indexed as if it had all num_buckets: the halves overlap and far future keys run off the table)."""

    def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
        rel = np.asarray(relative_position)
        out = np.zeros(rel.shape, dtype=np.int64)
        nb = num_buckets
        if bidirectional:
            if split == "half":
                nb = num_buckets // 2
            if split != "shared":
                out += (rel > 0) * (num_buckets // 2)
            n = np.abs(rel)
        else:
            n = np.maximum(-rel, 0)
        exact = nb // 2
        small = n < exact
        with np.errstate(divide="ignore"):
            r = np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * (nb - exact)
        large = np.minimum(exact + np.floor(np.where(small, 0.0, r)).astype(np.int64), nb - 1)
        return out + np.where(small, n, large)

    def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
        q = np.arange(S)[:, None] + T - S
        k = np.arange(T)[None, :]
        rel = q - k if relative == "query_minus_key" else k - q
        b = relative_position_bucket(rel, bidirectional, W.shape[0], max_distance)
        return np.moveaxis(W[b], -1, 0), (b, W.shape)

    def relative_position_bias_backward(dbias, cache):
        b, shape = cache
        dW = np.zeros(shape, dtype=dbias.dtype)
        flat_b = b.reshape(-1)
        flat = np.moveaxis(dbias, 0, -1).reshape(-1, shape[1])
        if backward == "fancy_index":
            dW[flat_b] += flat              # buffered: a repeated bucket keeps only its last row
        else:
            np.add.at(dW, flat_b, flat)
        return dW

    return SimpleNamespace(relative_position_bucket=relative_position_bucket,
                           relative_position_bias_forward=relative_position_bias_forward,
                           relative_position_bias_backward=relative_position_bias_backward)
# silu
# --------------------------------------------------------------------------------------------------


def _sigmoid_stable(z):
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0, e) / (1.0 + e)


def silu_impl(sigmoid="stable", beta=1.0, backward="correct"):
    """``sigmoid="exp_ratio"``: exp(z) / (1 + exp(z)) (nan for large z); ``beta``: y = x * sigmoid(beta x)."""

    def _sig(z):
        if sigmoid == "exp_ratio":
            e = np.exp(z)
            return e / (1.0 + e)
        return _sigmoid_stable(z)

    def silu_forward(x):
        s = _sig(beta * x)
        return x * s, (x, s)

    def silu_backward(dy, cache):
        x, s = cache
        if backward == "sigmoid_only":
            return dy * s
        if backward == "sigmoid_derivative":
            return dy * s * (1.0 - s)
        return dy * (s + beta * x * s * (1.0 - s))

    return SimpleNamespace(silu_forward=silu_forward, silu_backward=silu_backward)


# --------------------------------------------------------------------------------------------------
# swiglu
# --------------------------------------------------------------------------------------------------


def swiglu_impl(branch="correct", backward="correct"):
    """``branch``: "swapped" (SiLU on x W_up^T, the gate linear) or "both" (SiLU on both branches)."""

    def _silu(z):
        s = _sigmoid_stable(z)
        return z * s, s + z * s * (1.0 - s)                    # value, slope

    def swiglu_forward(x, W_gate, W_up, W_down):
        p, q = (x @ W_up.T, x @ W_gate.T) if branch == "swapped" else (x @ W_gate.T, x @ W_up.T)
        a, slope_a = _silu(p)                                   # the activated branch
        b, slope_b = _silu(q) if branch == "both" else (q, np.ones_like(q))
        y = (a * b) @ W_down.T
        return y, (x, W_gate, W_up, W_down, a, slope_a, b, slope_b)

    def swiglu_backward(dy, cache):
        x, W_gate, W_up, W_down, a, slope_a, b, slope_b = cache
        D, F = W_down.shape
        x2 = x.reshape(-1, D)
        dW_down = dy.reshape(-1, D).T @ (a * b).reshape(-1, F)
        dh = dy @ W_down
        da = dh if backward == "no_other_factor" else dh * b
        if backward == "silu_sigmoid_only":                     # slope s instead of s + p s (1 - s)
            p = x @ (W_up if branch == "swapped" else W_gate).T
            slope_a = _sigmoid_stable(p)
        dp = da * slope_a
        dq = dh * a * slope_b
        dWp, dWq = dp.reshape(-1, F).T @ x2, dq.reshape(-1, F).T @ x2
        Wp, Wq = (W_up, W_gate) if branch == "swapped" else (W_gate, W_up)
        dx = dp @ Wp if backward == "one_branch" else dp @ Wp + dq @ Wq
        dW_gate, dW_up = (dWq, dWp) if branch == "swapped" else (dWp, dWq)
        return dx, dW_gate, dW_up, dW_down

    return SimpleNamespace(swiglu_forward=swiglu_forward, swiglu_backward=swiglu_backward)
