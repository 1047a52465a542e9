"""T5's relative position bias, forward and backward."""

import numpy as np


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """relative_position (...) int, key - query -> buckets (...) int in [0, num_buckets)."""
    rel = np.asarray(relative_position)
    buckets = np.zeros(rel.shape, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2                              # two halves: the past and the future
        buckets += (rel > 0) * num_buckets
        n = np.abs(rel)
    else:
        n = -np.minimum(rel, 0)                        # the past only
    max_exact = num_buckets // 2
    small = n < max_exact
    with np.errstate(divide="ignore"):                 # log(0) where small: not used
        log_ratio = np.log(n / max_exact) / np.log(max_distance / max_exact)
    scaled = np.where(small, 0.0, log_ratio) * (num_buckets - max_exact)
    large = max_exact + scaled.astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(small, n, large)


def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
    """W (NB, H) -> (bias (H, S, T), cache)."""
    query = np.arange(S)[:, None] + (T - S)            # query i sits at key position i + T - S
    rel = np.arange(T)[None, :] - query                # (S, T) key minus query
    buckets = relative_position_bucket(rel, bidirectional, W.shape[0], max_distance)
    return W[buckets].transpose(2, 0, 1), (buckets, W.shape)


def relative_position_bias_backward(dbias, cache):
    """dbias (H, S, T) -> dW (NB, H).

    W[b, h] was copied to every pair (i, j) in bucket b, so its gradient is the sum of
    dbias[h, i, j] over those pairs: a scatter-add. np.add.at accumulates repeated buckets;
    dW[buckets] += dbias would not (NumPy's buffered fancy-index assignment writes each repeated
    index once).
    """
    buckets, (NB, H) = cache
    dW = np.zeros((NB, H), dtype=dbias.dtype)
    np.add.at(dW, buckets.reshape(-1), dbias.reshape(H, -1).T)
    return dW
