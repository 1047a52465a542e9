"""Rotary position embeddings (RoPE, Su et al. 2021), forward and backward.

Shapes: x (..., S, Dh) -- e.g. queries or keys (B, H, S, Dh) -- with Dh even; positions (S,) or any
shape that broadcasts to x's leading shape (..., S), e.g. (B, 1, S) for a left-padded batch of
(B, H, S, Dh) heads.

Each feature pair (a, b) of x at position p is rotated by the angle p * w_i, with the frequency of
pair i = 0 .. Dh/2 - 1 ``w_i = base ** (-2i / Dh)``::

    a' = a cos(p w_i) - b sin(p w_i)
    b' = a sin(p w_i) + b cos(p w_i)

Two layouts say which features form pair i:

* ``interleaved=False`` (the "rotate half" layout of GPT-NeoX and Hugging Face Llama): features
  ``(i, i + Dh/2)``;
* ``interleaved=True`` (the original paper's and Meta's Llama): features ``(2i, 2i + 1)``.

They are the same map up to a fixed permutation of the last axis. Because a rotation by p w_i
followed by the transpose of a rotation by r w_i is a rotation by (p - r) w_i, the score
``q_p . k_r`` after rotating both depends on p - r only: that is the point of RoPE.

The tables are computed once per call by :func:`rope_cos_sin` (angles in float64, then cast to x's
dtype); :func:`rope_apply` rotates with given tables, so an incremental decoder can build them once
for ``np.arange(max_len)`` and rotate the single new position t with ``cos[t:t + 1], sin[t:t + 1]``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..utils.checks import FLOAT16_HINT, float_dtypes

__all__ = ["RopeCache", "rope_cos_sin", "rope_apply", "rope_forward", "rope_backward"]


class RopeCache(NamedTuple):
    cos: np.ndarray               # (..., S, Dh/2) cos(p w_i), broadcastable against x's pairs
    sin: np.ndarray               # (..., S, Dh/2) sin(p w_i)
    interleaved: bool             # pairs (2i, 2i+1) if True, else (i, i + Dh/2)


def _check_head_dim(head_dim, name, shape=None):
    if isinstance(head_dim, (bool, np.bool_)) or not isinstance(head_dim, (int, np.integer)) or head_dim < 2 \
            or head_dim % 2:
        what = f"Dh (the last dimension of {name}, shape {tuple(shape)})" if shape is not None else f"{name} (Dh)"
        raise ValueError(f"rotary embeddings rotate feature pairs, so {what} must be a positive even int, "
                         f"got {head_dim!r}")


def _check_base(base):
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, (int, float, np.integer, np.floating)) \
            or not np.isfinite(base) or base <= 0:
        raise ValueError(f"base must be a positive finite number (10000.0 in the paper), got {base!r}")


def _check_positions(positions, lead=None):
    """``positions`` as an int64 array; ``lead`` = x.shape[:-1], the shape it must broadcast to."""
    p = np.asarray(positions)
    if p.dtype.kind not in "iu":
        raise TypeError(f"positions must be an integer array of token positions, got dtype {p.dtype}"
                        + (" (round and convert with positions.astype(np.int64))" if p.dtype.kind == "f" else ""))
    if p.ndim == 0:
        raise ValueError(f"positions must have at least 1 dimension (S,), got a scalar {p!r}; "
                         "pass np.array([t]) for the single position t")
    if lead is not None:
        s = lead[-1]
        ok = p.shape[-1] == s
        if ok:
            try:
                ok = np.broadcast_shapes(p.shape, lead) == tuple(lead)
            except ValueError:
                ok = False
        if not ok:
            raise ValueError(f"positions must have shape (S,) = ({s},) or one that broadcasts to x's leading "
                             f"shape {tuple(lead)} (e.g. {tuple(lead[:1]) + (1,) * (len(lead) - 2) + (s,)} for "
                             f"a batch), got shape {p.shape}")
    return p.astype(np.int64, copy=False)


def rope_cos_sin(positions, head_dim, base=10000.0, dtype=np.float64):
    """The rotation tables ``cos(p w_i)``, ``sin(p w_i)`` for every position p and pair i.

    Parameters
    ----------
    positions : int ndarray, shape (..., S)
        Token positions (negative ones are allowed: a rotation by a negative angle).
    head_dim : int
        Dh, even.
    base : float
        The frequency of pair i is ``base ** (-2i / Dh)``.
    dtype : numpy dtype
        Of the tables (float32 for float32 heads). The angles are computed in float64 and cast once.

    Returns
    -------
    cos, sin : ndarray, shape (..., S, Dh/2)
    """
    _check_head_dim(head_dim, "head_dim")
    _check_base(base)
    p = _check_positions(positions)
    inv_freq = float(base) ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)   # (Dh/2,) w_i
    angles = p[..., None].astype(np.float64) * inv_freq                                  # (..., S, Dh/2)
    return np.cos(angles).astype(dtype, copy=False), np.sin(angles).astype(dtype, copy=False)


def _pairs(x, interleaved):
    """The two halves (a, b) of every pair: views of x, each (..., S, Dh/2)."""
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    h = x.shape[-1] // 2
    return x[..., :h], x[..., h:]


def _rotate(x, cos, sin, interleaved):
    """Rotate every pair (a, b) of x by the angle whose cosine and sine are given."""
    a, b = _pairs(x, interleaved)                 # (..., S, Dh/2) each
    out = np.empty(np.broadcast_shapes(x.shape[:-1], cos.shape[:-1]) + x.shape[-1:], dtype=x.dtype)
    out_a, out_b = _pairs(out, interleaved)
    np.multiply(a, cos, out=out_a)                # (..., S, Dh/2)  a cos
    out_a -= b * sin                              #                 - b sin
    np.multiply(a, sin, out=out_b)                # (..., S, Dh/2)  a sin
    out_b += b * cos                              #                 + b cos
    return out


def _check_x(x):
    # float16 only inside numpy_transformer.amp's float16 copy (cos/sin computed in float64, then rounded)
    if not isinstance(x, np.ndarray) or x.dtype not in float_dtypes():
        got = f"dtype {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
        raise TypeError(f"x must be a float32 or float64 array (..., S, Dh), got {got}"
                        + (f"; {FLOAT16_HINT}" if isinstance(x, np.ndarray) and x.dtype == np.float16 else ""))
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., S, Dh), got shape {x.shape}")
    _check_head_dim(x.shape[-1], "x", x.shape)


def rope_apply(x, cos, sin, interleaved=False):
    """Rotate x with precomputed tables (from :func:`rope_cos_sin`).

    Parameters
    ----------
    x : ndarray, shape (..., S, Dh)
    cos, sin : ndarray, shape broadcastable to (..., S, Dh/2), x's dtype
        E.g. ``cos[t:t + 1]`` of a table built for ``np.arange(max_len)``: the one new position t of
        an incremental decode step.
    interleaved : bool
        Pairs (2i, 2i+1) if True, else (i, i + Dh/2).

    Returns
    -------
    out : ndarray, shape of x
    cache : RopeCache
    """
    _check_x(x)
    cos, sin = np.asarray(cos), np.asarray(sin)
    want = x.shape[:-1] + (x.shape[-1] // 2,)
    for name, t in (("cos", cos), ("sin", sin)):
        if t.dtype != x.dtype:
            raise TypeError(f"{name} must have x's dtype {x.dtype}, got {t.dtype} "
                            f"(build it with rope_cos_sin(..., dtype=x.dtype))")
        try:
            ok = np.broadcast_shapes(t.shape, want) == want
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{name} must broadcast to x's pairs {want} (..., S, Dh/2), got shape {t.shape}")
    return _rotate(x, cos, sin, bool(interleaved)), RopeCache(cos, sin, bool(interleaved))


def rope_forward(x, positions=None, base=10000.0, interleaved=False):
    """Rotary position embedding of x (queries or keys), as Hugging Face's ``apply_rotary_pos_emb``
    (``interleaved=False``) or Meta's ``apply_rotary_emb`` (``interleaved=True``).

    ``out`` rotates each feature pair (a, b) at position p by ``p * base ** (-2i / Dh)``:
    ``(a cos - b sin, a sin + b cos)``. It has no parameters; apply it to q and k (never v) after
    their projections and before the scores.

    Parameters
    ----------
    x : ndarray, shape (..., S, Dh)
        float32 or float64, Dh even.
    positions : int ndarray, shape (S,) or broadcastable to x.shape[:-1], optional
        The position of each row; default ``np.arange(S)``. Per-sequence positions (a left-padded
        batch) broadcast against the leading axes by NumPy's rules: (B, S) for x (B, S, Dh),
        (B, 1, S) for x (B, H, S, Dh). A decode step passes ``np.array([t])``.
    base : float
        Frequency of pair i: ``base ** (-2i / Dh)``.
    interleaved : bool
        False: pairs (i, i + Dh/2) ("rotate half", GPT-NeoX / HF Llama). True: pairs (2i, 2i+1) (the
        paper, Meta's Llama).

    Returns
    -------
    out : ndarray, shape and dtype of x
    cache : RopeCache

    Raises
    ------
    TypeError
        x not float32/float64, positions not integers.
    ValueError
        Dh odd, x with fewer than 2 dimensions, positions of a shape that does not fit, base <= 0.
    """
    _check_x(x)
    if not isinstance(interleaved, (bool, np.bool_)):
        raise TypeError(f"interleaved must be True or False, got {interleaved!r}")
    s, dh = x.shape[-2], x.shape[-1]
    positions = np.arange(s) if positions is None else _check_positions(positions, x.shape[:-1])
    cos, sin = rope_cos_sin(positions, dh, base, x.dtype)          # (..., S, Dh/2) each
    return _rotate(x, cos, sin, bool(interleaved)), RopeCache(cos, sin, bool(interleaved))


def rope_backward(dout, cache):
    """Backward of RoPE.  Shapes: dout (..., S, Dh) -> dx (..., S, Dh).

    Forward: for each pair (a, b) and its angle theta = p w_i, ``(a', b') = R(theta) (a, b)`` with the
    rotation matrix ``R(theta) = [[cos, -sin], [sin, cos]]``; the pairs do not interact, so the
    Jacobian of the whole map is block diagonal with these 2 x 2 blocks (in the layout's order).

    The vector-Jacobian product of a linear map is its transpose: ``(da, db) = R(theta)^T (da', db')``.
    A rotation is orthogonal, ``R(theta)^T = R(theta)^-1 = R(-theta)`` (cos is even, sin odd), so::

        da =  da' cos + db' sin
        db = -da' sin + db' cos

    i.e. dx is dout rotated by -theta: the forward with sin negated, the same tables, no new
    trigonometry. (With positions broadcast over a batch, each row still has its own rotation:
    nothing is summed.) The positions are integers: they get no gradient.
    """
    cos, sin, interleaved = cache
    return _rotate(dout, cos, -sin, interleaved)                   # (..., S, Dh) rotated by -theta
