"""The drills' basic variants (softmax, the norms, rope, GELU, linear, embedding, cross-entropy,
positional encoding): what every other family builds on. Re-exported by :mod:`.variants`; the
attention family (:mod:`.variants_attention`) and the decoder layer (:mod:`.variants_decoder`)
import the shared pieces (``_softmax``, ``_softmax_bwd``, ``layer_norm_impl``) from here, so no
knob module imports another in a circle.
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
