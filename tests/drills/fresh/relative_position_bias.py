"""Fresh unlisted mistakes for relative_position_bias."""

MISTAKES = [
    dict(label="bidirectional: num_buckets not halved between the past and the future",
         keywords=["half", "halve", "bidirectional", "num_buckets"],
         patch=[("        num_buckets //= 2                              # two halves: the past and the future\n", "")]),
    dict(label="log bucket's numerator log(n) instead of log(n / max_exact)",
         keywords=["log", "max_exact", "bucket"],
         patch=[("log_ratio = np.log(n / max_exact) /", "log_ratio = np.log(n) /")]),
    dict(label="log buckets rounded instead of floored",
         keywords=["floor", "round", "truncat"],
         patch=[("large = max_exact + scaled.astype(np.int64)", "large = max_exact + np.round(scaled).astype(np.int64)")]),
    dict(label="unidirectional keeps the future instead of the past (max(rel, 0))",
         keywords=["past", "future", "direction", "sign"],
         patch=[("n = -np.minimum(rel, 0) ", "n = np.maximum(rel, 0) ")]),
    dict(label="bidirectional: distance 0 put in the future half (rel >= 0)",
         keywords=["zero", "future", "offset", "bidirectional"],
         patch=[("buckets += (rel > 0) * num_buckets", "buckets += (rel >= 0) * num_buckets")]),
]

CORRECT = '''
import math

import numpy as np


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    rp = np.asarray(relative_position).astype(np.int64)
    out = np.zeros_like(rp)
    nb = num_buckets
    if bidirectional:
        nb = nb // 2
        out = np.where(rp > 0, nb, 0).astype(np.int64)
        dist = np.abs(rp)
    else:
        dist = np.where(rp < 0, -rp, 0)
    exact = nb // 2
    safe = np.maximum(dist, 1).astype(np.float64)
    logb = exact + (np.log(safe / exact) / math.log(max_distance / exact) * (nb - exact)).astype(np.int64)
    logb = np.clip(logb, None, nb - 1)
    return out + np.where(dist < exact, dist, logb)


def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
    q_pos = np.arange(T - S, T)
    rel = np.arange(T)[np.newaxis, :] - q_pos[:, np.newaxis]
    b = relative_position_bucket(rel, bidirectional, W.shape[0], max_distance)
    bias = np.moveaxis(W[b], -1, 0)
    return bias, {"b": b, "nb": W.shape[0]}


def relative_position_bias_backward(dbias, cache):
    b, nb = cache["b"], cache["nb"]
    heads = dbias.shape[0]
    onehot = (b.ravel()[:, None] == np.arange(nb)[None, :]).astype(np.float64)
    return onehot.T @ dbias.reshape(heads, -1).T
'''
