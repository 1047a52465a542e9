"""Position biases added to the attention scores: ALiBi's fixed linear bias (:func:`alibi_bias`, no
parameters, so no backward) and T5's learned, bucketed relative position bias
(:func:`relative_position_bucket`, :func:`relative_position_bias_forward` / ``_backward``).

Both return an (H, S, T) array ``bias`` that is added to the scaled scores before the softmax,
``softmax(q k^T / sqrt(Dh) + bias)``, broadcast over the batch. Shapes: H heads, S queries, T keys,
NB buckets.

Positions. Query ``i`` sits at key position ``i + offset``; the default ``offset = T - S`` aligns the
last query with the last key, which is right both for a full pass (S = T, offset 0) and for a
KV-cache decoding step (S = 1 new query against T cached keys: the query is at position T - 1).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..utils.checks import as_float_dtype

__all__ = ["alibi_slopes", "alibi_bias", "relative_position_bucket", "relative_positions",
           "RelativePositionBiasCache", "relative_position_bias_forward", "relative_position_bias_backward"]


def _check_count(value, name, low=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _query_offset(s, t, offset):
    if offset is None:
        return t - s
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an int (the key position of query 0) or None (T - S), got {offset!r}")
    return int(offset)


def relative_positions(s, t, offset=None):
    """(S, T) int64 ``j - (i + offset)``: key position minus query position (negative: the key is in
    the past). ``offset`` is the key position of query 0 (default ``T - S``, end-aligned)."""
    s, t = _check_count(s, "s", 0), _check_count(t, "t", 0)
    offset = _query_offset(s, t, offset)
    return np.arange(t)[None, :] - (np.arange(s)[:, None] + offset)          # (S, T)


def alibi_slopes(num_heads):
    """ALiBi's per-head slopes (Press et al. 2022), float64 (H,).

    For H a power of two: the geometric sequence ``m_h = 2 ** (-8 h / H)``, h = 1..H (H = 8: 1/2,
    1/4, ..., 1/256). For other H the reference code's interleaving: the H' slopes of the closest
    lower power of two H', then every other slope of 2 H' (those not already used), the first H - H'
    of them (H = 6: 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3).
    """
    num_heads = _check_count(num_heads, "num_heads")
    p = 2 ** int(math.floor(math.log2(num_heads)))                          # closest power of two <= H
    slopes = 2.0 ** (-8.0 * np.arange(1, p + 1) / p)                       # (H',)
    if p == num_heads:
        return slopes
    odd = 2.0 ** (-8.0 * np.arange(1, 2 * (num_heads - p), 2) / (2 * p))   # (H - H',) slopes 1, 3, 5.. of 2H'
    return np.concatenate([slopes, odd])


def alibi_bias(num_heads, s, t, dtype=np.float64, *, offset=None):
    """ALiBi's additive attention bias, (H, S, T): ``bias[h, i, j] = -m_h * ((i + offset) - j)``.

    A query at position ``p`` penalises a key ``p - j`` positions back by ``m_h`` per position
    (:func:`alibi_slopes`). The default ``offset = T - S`` puts the last query at the last key: with
    S = T it is the paper's matrix, and a cached decoding step (S = 1 against T keys) gets the last row
    of it. It is meant to be used *with the causal mask*: above the diagonal (keys in the future)
    the formula gives ``+m_h * distance``, which the mask removes.

    There are no parameters and no backward. The bias is a constant added to the scores, so
    ``d loss / d bias = dscores`` (summed over the batch), but nothing upstream of it is learned or
    depends on the input: the gradient would have nowhere to go. The gradient *through* the scores
    to q and k is unchanged by adding a constant.

    Parameters
    ----------
    num_heads : int
    s, t : int
        Query and key lengths.
    dtype : np.float32 or np.float64
        Of the result (computed in float64). Anything else raises TypeError (an integer dtype would
        truncate every bias to 0).
    offset : int, optional
        Key position of query 0 (default ``t - s``).

    Returns
    -------
    ndarray, shape (H, S, T)
    """
    dtype = as_float_dtype(dtype, "alibi_bias: dtype")   # an integer dtype would truncate the slopes to 0
    slopes = alibi_slopes(num_heads)                                        # (H,)
    rel = relative_positions(s, t, offset)                                  # (S, T) j - i, <= 0 in the past
    return (slopes[:, None, None] * rel[None]).astype(dtype)                # (H, S, T)


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket of each relative position ``memory_position - query_position`` (int array).

    Unidirectional (a decoder: only the past counts): ``n = max(-relative_position, 0)``, so every
    future key shares bucket 0 with the query's own position. Bidirectional (an encoder): half the
    buckets for keys in the future (``relative_position > 0``, offset by ``num_buckets // 2``) and half
    for the past, each half indexed by ``n = |relative_position|``. Within a half of ``nb`` buckets,
    the first ``max_exact = nb // 2`` are exact (bucket n for n < max_exact); the rest are
    log-spaced, ``max_exact + floor(log(n / max_exact) / log(max_distance / max_exact) * (nb -
    max_exact))``, and every n beyond ``max_distance`` shares the last bucket ``nb - 1``.

    The logarithm is taken in float32, as T5 (Mesh TensorFlow) and Hugging Face do, so the buckets
    are theirs. The one exception is a tie: where the exact value of the scaled logarithm is an
    integer (``num_buckets=34, max_distance=27``: n = 12 and 18, since 12/8 = 1.5 and 27/8 = 1.5^3),
    float32 rounding in each library's own ``log`` decides between two neighbouring buckets, and
    NumPy's and torch's may decide differently (T5's defaults 32/128 have no such disagreement).
    An odd ``num_buckets`` with ``bidirectional`` leaves the last bucket unused (as Hugging Face).

    Parameters
    ----------
    relative_position : ndarray of int
    bidirectional : bool
    num_buckets : int
        At least 2 (4 when bidirectional): each half needs an exact bucket.
    max_distance : int
        Greater than ``max_exact``.

    Returns
    -------
    ndarray of int64, the shape of ``relative_position``, values in ``[0, num_buckets)``
    """
    rp = np.asarray(relative_position)
    if rp.dtype.kind not in "iu":
        raise TypeError(f"relative_position must be an integer array, got dtype {rp.dtype}")
    num_buckets = _check_count(num_buckets, "num_buckets", 4 if bidirectional else 2)
    half = num_buckets // 2 if bidirectional else num_buckets
    max_exact = half // 2
    max_distance = _check_count(max_distance, "max_distance", max_exact + 1)
    rp = rp.astype(np.int64)
    buckets = np.zeros(rp.shape, dtype=np.int64)
    if bidirectional:
        buckets += (rp > 0) * half                                  # the future: the second half
        n = np.abs(rp)
    else:
        n = -np.minimum(rp, 0)                                      # the past only; the future is 0
    is_small = n < max_exact
    with np.errstate(divide="ignore"):                              # log(0): only where is_small
        scaled = (np.log(n.astype(np.float32) / np.float32(max_exact))
                  / np.float32(math.log(max_distance / max_exact)) * np.float32(half - max_exact))
    large = max_exact + np.where(is_small, 0, scaled).astype(np.int64)      # truncation, as .to(long)
    large = np.minimum(large, half - 1)
    return buckets + np.where(is_small, n, large)


class RelativePositionBiasCache(NamedTuple):
    buckets: np.ndarray           # (S, T) int bucket of each (query, key) pair
    num_buckets: int              # NB


def relative_position_bias_forward(weight, buckets):
    """T5's learned bias: ``bias[h, i, j] = weight[buckets[i, j], h]``, a lookup of one learned
    scalar per (bucket, head).

    Parameters
    ----------
    weight : ndarray, shape (NB, H)
        ``relative_attention_bias.weight``.
    buckets : ndarray of int, shape (S, T)
        From :func:`relative_position_bucket`.

    Returns
    -------
    bias : ndarray, shape (H, S, T)
    cache : RelativePositionBiasCache
    """
    bias = weight[buckets].transpose(2, 0, 1)                      # (S, T, H) -> (H, S, T)
    return bias, RelativePositionBiasCache(buckets, weight.shape[0])


def relative_position_bias_backward(dbias, cache):
    """Backward of ``bias[h, i, j] = W[buckets[i, j], h]``.  Shapes: dbias (H, S, T) -> dW (NB, H).

    The forward is an embedding lookup with the pairs (i, j) as the "tokens": entry ``W[b, h]`` was
    copied to every (h, i, j) whose pair falls in bucket b, so its gradient is the sum of ``dbias[h,
    i, j]`` over those pairs. Many pairs share a bucket (every pair at the same distance, and every
    distant pair the last one), so it is a scatter-*add*: ``np.add.at`` accumulates repeated
    indices, where ``dW[buckets] = ...`` (or ``+=``) would keep one write per bucket and lose the rest.
    The buckets are integers: no gradient.
    """
    buckets, num_buckets = cache
    h = dbias.shape[0]
    dweight = np.zeros((num_buckets, h), dtype=dbias.dtype)                 # (NB, H)
    np.add.at(dweight, buckets.reshape(-1), dbias.reshape(h, -1).T)         # (S*T,) rows of (S*T, H)
    return dweight
