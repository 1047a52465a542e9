"""Configurable implementations of every drill, used to recognise the classic mistakes.

Each ``*_impl(**knobs)`` returns a namespace with the exercise's functions (same names and signatures
as the skeleton). With the default knobs the namespace is *correct* (a test grades it and it must pass);
each mistake in :mod:`numpy_transformer.drills.exercises` is a set of knob values that reproduces one
classic error, forward and backward consistently, the way a person making that error would write it.

The grader runs these variants on the cases where a user's array is wrong and reports the variant whose
output the user's output matches. They are deliberately written independently of
:mod:`numpy_transformer.functional` (the verified reference the grader compares against).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..functional import erf

# --------------------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------------------


def _softmax(x, axis=-1, stable=True):
    """Softmax along ``axis``; slices that are entirely -inf give zeros (the project's convention)."""
    if stable:
        m = np.max(x, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(x - m)
    else:
        e = np.exp(x)
    s = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(s == 0, 1.0, s)


def _softmax_bwd(dy, y, axis=-1, mode="correct"):
    if mode == "no_rowsum":
        return y * dy
    if mode == "diagonal":
        return y * (1 - y) * dy
    return y * (dy - np.sum(dy * y, axis=axis, keepdims=True))


# --------------------------------------------------------------------------------------------------
# softmax
# --------------------------------------------------------------------------------------------------


def softmax_impl(axis=-1, stable=True, backward="correct"):
    def softmax_forward(x):
        y = _softmax(x, axis, stable)
        return y, y

    def softmax_backward(dy, y):
        return _softmax_bwd(dy, y, axis, backward)

    return SimpleNamespace(softmax_forward=softmax_forward, softmax_backward=softmax_backward)


# --------------------------------------------------------------------------------------------------
# layer norm
# --------------------------------------------------------------------------------------------------


def _ln_axes(x, axis):
    return (x.ndim - 1,) if axis == "last" else tuple(range(x.ndim - 1))


def layer_norm_impl(ddof=0, eps_outside=False, axis="last", backward="correct"):
    """``axis="leading"`` normalises over every leading axis (a BatchNorm) instead of the features."""

    def layer_norm_forward(x, gamma, beta, eps=1e-5):
        ax = _ln_axes(x, axis)
        mu = x.mean(axis=ax, keepdims=True)
        xc = x - mu
        n = int(np.prod([x.shape[a] for a in ax]))
        var = np.sum(xc * xc, axis=ax, keepdims=True) / (n - ddof)
        rstd = 1.0 / (np.sqrt(var) + eps) if eps_outside else 1.0 / np.sqrt(var + eps)
        xhat = xc * rstd
        return xhat * gamma + beta, (xhat, rstd, gamma, ax)

    def layer_norm_backward(dy, cache):
        xhat, rstd, gamma, ax = cache
        lead = tuple(range(dy.ndim - 1))
        dgamma = np.sum(dy * xhat, axis=lead)
        dbeta = np.sum(dy, axis=lead)
        dxhat = dy if backward == "no_gamma" else dy * gamma
        m1 = np.mean(dxhat, axis=ax, keepdims=True)
        m2 = np.mean(dxhat * xhat, axis=ax, keepdims=True)
        if backward == "no_mean":
            dx = rstd * (dxhat - xhat * m2)
        elif backward == "no_xhat":
            dx = rstd * (dxhat - m1)
        elif backward == "direct_only":
            dx = rstd * dxhat
        else:
            dx = rstd * (dxhat - m1 - xhat * m2)
        return dx, dgamma, dbeta

    return SimpleNamespace(layer_norm_forward=layer_norm_forward, layer_norm_backward=layer_norm_backward)


# --------------------------------------------------------------------------------------------------
# rms norm
# --------------------------------------------------------------------------------------------------


def rms_norm_impl(center=False, eps_outside=False, backward="correct"):
    """``center=True`` subtracts the mean first (a LayerNorm without beta); ``backward="layer_norm"`` then
    also uses LayerNorm's backward (with its -mean(dxhat) term), as someone adapting LayerNorm would."""

    def rms_norm_forward(x, gamma, eps=1e-6):
        xc = x - x.mean(axis=-1, keepdims=True) if center else x
        ms = np.sum(xc ** 2, axis=-1, keepdims=True) / x.shape[-1]
        rstd = 1.0 / (np.sqrt(ms) + eps) if eps_outside else 1.0 / np.sqrt(ms + eps)
        xhat = xc * rstd
        return xhat * gamma, (xhat, rstd, gamma)

    def rms_norm_backward(dy, cache):
        xhat, rstd, gamma = cache
        dgamma = np.sum(dy * xhat, axis=tuple(range(dy.ndim - 1)))
        dxhat = dy if backward == "no_gamma" else dy * gamma
        proj = xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)
        if backward == "no_projection":
            dx = rstd * dxhat
        elif backward == "layer_norm":
            dx = rstd * (dxhat - np.mean(dxhat, axis=-1, keepdims=True) - proj)
        else:
            dx = rstd * (dxhat - proj)
        return dx, dgamma

    return SimpleNamespace(rms_norm_forward=rms_norm_forward, rms_norm_backward=rms_norm_backward)


# --------------------------------------------------------------------------------------------------
# rotary position embeddings
# --------------------------------------------------------------------------------------------------


def rope_impl(layout="asked", exponent="pair", sin_sign=1.0, backward="transpose"):
    """``layout``: "asked" (the pairs ``interleaved`` asks for), "swapped" (the other one), "half" or
    "interleaved" (one layout hard-coded whatever is asked); ``exponent``: "pair" (base^(-2i/Dh),
    correct) or "no_two" (base^(-i/Dh)); ``sin_sign=-1``: the sine's sign flipped in the forward
    (``cat(x2, -x1)`` for rotate_half: a rotation by -theta), its backward still the transpose of what
    the forward did; ``backward="same_rotation"``: dx rotated by +theta like the forward (not R^T)."""

    def _split(n, interleaved):
        pairs_2i = {"asked": interleaved, "swapped": not interleaved, "half": False, "interleaved": True}[layout]
        idx = np.arange(n)
        return (idx[0::2], idx[1::2]) if pairs_2i else (idx[: n // 2], idx[n // 2:])

    def _turn(x, cos, sin, first, second):
        out = np.empty_like(x)
        a, b = x[..., first], x[..., second]
        out[..., first] = a * cos - b * sin
        out[..., second] = a * sin + b * cos
        return out

    def rope_forward(x, positions, base=10000.0, interleaved=False):
        dh = x.shape[-1]
        i = np.arange(dh // 2, dtype=np.float64)
        freq = base ** (-(i if exponent == "no_two" else 2 * i) / dh)
        theta = np.asarray(positions, dtype=np.float64)[:, None] * freq          # (S, Dh/2)
        cos, sin = np.cos(theta), sin_sign * np.sin(theta)
        first, second = _split(dh, interleaved)
        return _turn(x, cos, sin, first, second), (cos, sin, first, second)

    def rope_backward(dy, cache):
        cos, sin, first, second = cache
        return _turn(dy, cos, sin if backward == "same_rotation" else -sin, first, second)

    return SimpleNamespace(rope_forward=rope_forward, rope_backward=rope_backward)


# --------------------------------------------------------------------------------------------------
# gelu
# --------------------------------------------------------------------------------------------------

_C = math.sqrt(2.0 / math.pi)
_K = 0.044715


def _phi(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _cdf(x):
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_impl(exact="erf", backward="correct"):
    """``exact``: what is computed when ``approximate="none"`` (erf, or the tanh / sigmoid approximation)."""

    def _tanh_fwd(x):
        return 0.5 * x * (1 + np.tanh(_C * (x + _K * x ** 3)))

    def _tanh_slope(x):
        t = np.tanh(_C * (x + _K * x ** 3))
        inner = 1.0 if backward == "no_inner" else (1 + 3 * _K * x * x)
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _C * inner

    def _sigmoid(z):
        return 1.0 / (1.0 + np.exp(-z))

    def gelu_forward(x, approximate="none"):
        if approximate == "tanh":
            return _tanh_fwd(x), (x, approximate)
        if exact == "tanh":
            return _tanh_fwd(x), (x, approximate)
        if exact == "sigmoid":
            return x * _sigmoid(1.702 * x), (x, approximate)
        return x * _cdf(x), (x, approximate)

    def gelu_backward(dy, cache):
        x, approximate = cache
        if approximate == "tanh" or exact == "tanh":
            return dy * _tanh_slope(x)
        if exact == "sigmoid":
            s = _sigmoid(1.702 * x)
            return dy * (s + 1.702 * x * s * (1 - s))
        if backward == "no_x_pdf":
            return dy * _cdf(x)
        if backward == "pdf_unnormalised":
            return dy * (_cdf(x) + x * np.exp(-0.5 * x * x))
        return dy * (_cdf(x) + x * _phi(x))

    return SimpleNamespace(gelu_forward=gelu_forward, gelu_backward=gelu_backward)


# --------------------------------------------------------------------------------------------------
# linear
# --------------------------------------------------------------------------------------------------


def linear_impl(weight_layout="torch", dw="correct", db="sum"):
    """``weight_layout="untransposed"`` computes ``x @ W`` (only meaningful for a square W)."""

    def linear_forward(x, W, b):
        Wt = W if weight_layout == "untransposed" else W.T
        return x @ Wt + b, (x, W)

    def linear_backward(dy, cache):
        x, W = cache
        x2 = x.reshape(-1, x.shape[-1])
        dy2 = dy.reshape(-1, dy.shape[-1])
        if weight_layout == "untransposed":
            dx = dy @ W.T
            dW = x2.T @ dy2
        else:
            dx = dy @ W
            dW = dy2.T @ x2
        if dw == "transposed":
            dW = dW.T
        db_ = dy2.mean(axis=0) if db == "mean" else dy2.sum(axis=0)
        return dx, dW, db_

    return SimpleNamespace(linear_forward=linear_forward, linear_backward=linear_backward)


# --------------------------------------------------------------------------------------------------
# embedding
# --------------------------------------------------------------------------------------------------


def embedding_impl(backward="add_at"):
    def embedding_forward(ids, W):
        return W[ids], (ids, W.shape)

    def embedding_backward(dout, cache):
        ids, shape = cache
        dW = np.zeros(shape, dtype=dout.dtype)
        flat_ids = ids.reshape(-1)
        flat = dout.reshape(-1, shape[1])
        if backward == "fancy_index":
            dW[flat_ids] += flat            # buffered: a repeated id keeps only its last row
        else:
            np.add.at(dW, flat_ids, flat)
        return dW

    return SimpleNamespace(embedding_forward=embedding_forward, embedding_backward=embedding_backward)


# --------------------------------------------------------------------------------------------------
# cross-entropy (fused with softmax)
# --------------------------------------------------------------------------------------------------


def cross_entropy_impl(logp="logsumexp", reduction="mean", backward="correct"):
    """``logp``: "logsumexp" (stable), "naive" (exp without the max: overflows; p = e / sum e),
    "naive_exp" (the same log-probabilities, p = exp(log p): 0 where the sum overflowed), "log_probs"
    (log of the softmax probabilities: -inf when one underflows)."""

    def cross_entropy_forward(logits, targets):
        n = logits.shape[0]
        rows = np.arange(n)
        if logp == "naive_exp":
            lp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
            p = np.exp(lp)
        elif logp == "naive":
            e = np.exp(logits)
            lp = logits - np.log(e.sum(axis=-1, keepdims=True))
            p = e / e.sum(axis=-1, keepdims=True)
        elif logp == "log_probs":
            p = _softmax(logits)
            lp = np.log(p)
        else:
            m = logits.max(axis=-1, keepdims=True)
            z = logits - m
            lp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
            p = np.exp(lp)
        loss = -lp[rows, targets].sum()
        if reduction == "mean":
            loss = loss / n
        return loss, (p, targets)

    def cross_entropy_backward(dloss, cache):
        p, targets = cache
        n = p.shape[0]
        d = p.copy()
        if backward == "column_subtract":
            d[:, targets] -= 1
        elif backward != "no_minus_one":
            d[np.arange(n), targets] -= 1
        if reduction == "mean" and backward != "no_div_n":
            d = d / n
        if backward != "ignore_dloss":
            d = d * dloss
        return d

    return SimpleNamespace(cross_entropy_forward=cross_entropy_forward,
                           cross_entropy_backward=cross_entropy_backward)


# --------------------------------------------------------------------------------------------------
# positional encoding
# --------------------------------------------------------------------------------------------------


def positional_encoding_impl(swap=False, layout="interleaved", exponent="pair", first_position=0):
    """``exponent``: "pair" (10000^(2i/D), correct), "column" (10000^(j/D) with j the column),
    "no_two" (10000^(i/D)); ``layout="concat"`` puts all sines first, then all cosines."""

    def positional_encoding(S, D):
        pos = np.arange(first_position, first_position + S, dtype=np.float64)[:, None]   # (S, 1)
        half = D // 2
        i = np.arange(half, dtype=np.float64)                                           # pair index
        if exponent == "no_two":
            even_freq = odd_freq = 10000.0 ** (-i / D)
        elif exponent == "column":
            even_freq = 10000.0 ** (-(2 * i) / D)
            odd_freq = 10000.0 ** (-(2 * i + 1) / D)
        else:
            even_freq = odd_freq = 10000.0 ** (-(2 * i) / D)
        first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
        a = first(pos * even_freq)
        b = second(pos * odd_freq)
        pe = np.zeros((S, D))
        if layout == "concat":
            pe[:, :half] = a
            pe[:, half:] = b
        else:
            pe[:, 0::2] = a
            pe[:, 1::2] = b
        return pe

    return SimpleNamespace(positional_encoding=positional_encoding)


# the attention family (scaled dot-product attention, multi-head attention, the encoder layer) and its
# shared mask and causal knobs live in variants_attention.py; re-exported here, so `V.attention_impl` works
from . import variants_attention as _attention  # noqa: E402

attention_impl, mha_impl = _attention.attention_impl, _attention.mha_impl
encoder_layer_impl = _attention.encoder_layer_impl
kv_cache_impl, cross_attention_impl = _attention.kv_cache_impl, _attention.cross_attention_impl
flash_backward_impl = _attention.flash_backward_impl
_attend, _attend_backward, _causal, _scale_value = (_attention._attend, _attention._attend_backward, _attention._causal,
                                                    _attention._scale_value)
_split, _merge, _mha_parts = _attention._split, _attention._merge, _attention._mha_parts


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


# ALiBi and learned positions: variants_positions.py, re-exported here
from . import variants_positions as _positions  # noqa: E402

alibi_impl, learned_positions_impl = _positions.alibi_impl, _positions.learned_positions_impl


from . import variants_training as _training  # noqa: E402

dropout_impl = _training.dropout_impl
cross_entropy_options_impl = _training.cross_entropy_options_impl
adamw_impl = _training.adamw_impl

# the decoder layer's variant lives in variants_decoder.py (built on the attention family's pieces)
from . import variants_decoder as _decoder  # noqa: E402

decoder_layer_impl = _decoder.decoder_layer_impl
