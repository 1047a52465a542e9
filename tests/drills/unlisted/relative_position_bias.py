"""Unlisted mistakes for relative_position_bias."""

MISTAKES = [
    dict(label="queries aligned top-left (query i at key i, not i + T - S)",
         keywords=["i + t - s", "align", "offset", "top-left"],
         patch=[("query = np.arange(S)[:, None] + (T - S)", "query = np.arange(S)[:, None]")]),
    dict(label="relative position query - key instead of key - query",
         keywords=["sign", "key - query", "direction", "flip"],
         patch=[("rel = np.arange(T)[None, :] - query ", "rel = query - np.arange(T)[None, :] ")]),
    dict(label="repeated buckets written once: dW[buckets] += instead of a scatter-add",
         keywords=["repeat", "add.at", "scatter", "accumulat"],
         patch=[("np.add.at(dW, buckets.reshape(-1), dbias.reshape(H, -1).T)", "dW[buckets.reshape(-1)] += dbias.reshape(H, -1).T")]),
    dict(label="bidirectional: the future half offset applied to the past (rel < 0)",
         keywords=["bidirectional", "future", "past", "sign"],
         patch=[("buckets += (rel > 0) * num_buckets", "buckets += (rel < 0) * num_buckets")]),
    dict(label="log bucket computed with max_distance instead of max_distance / max_exact",
         keywords=["log", "max_distance", "bucket"],
         patch=[("np.log(max_distance / max_exact)", "np.log(max_distance)")]),
    dict(label="large buckets not clipped to num_buckets - 1",
         keywords=["clip", "num_buckets - 1", "max_distance", "bucket"],
         patch=[("    large = np.minimum(large, num_buckets - 1)\n", "")]),
    dict(label="the backward transposes dbias wrongly (H and T mixed: reshape without moving H last)",
         keywords=["transpose", "reshape", "head"],
         patch=[("dbias.reshape(H, -1).T)", "dbias.reshape(-1, H))")]),
    dict(label="unidirectional: the future kept (abs) instead of clipped to the past",
         keywords=["bidirectional", "future", "past", "causal"],
         patch=[("n = -np.minimum(rel, 0)                        # the past only", "n = np.abs(rel)")]),
]

CORRECT = '''
import math

import numpy as np


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    rp = np.asarray(relative_position).astype(np.int64)
    out = np.zeros(rp.shape, dtype=np.int64)
    nb = num_buckets
    if bidirectional:
        nb = nb // 2
        out = out + np.where(rp > 0, nb, 0)
        dist = np.abs(rp)
    else:
        dist = np.maximum(-rp, 0)
    exact = nb // 2
    far = np.maximum(dist, 1).astype(np.float64)
    logb = exact + (np.log(far / exact) / math.log(max_distance / exact) * (nb - exact)).astype(np.int64)
    logb = np.minimum(logb, nb - 1)
    return out + np.where(dist < exact, dist, logb)


def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
    keys = np.arange(T)
    queries = np.arange(T - S, T)
    b = relative_position_bucket(keys[None, :] - queries[:, None], bidirectional, W.shape[0], max_distance)
    return np.moveaxis(W[b], -1, 0), (b, W.shape[0])


def relative_position_bias_backward(dbias, cache):
    b, nb = cache
    H = dbias.shape[0]
    dW = np.stack([np.bincount(b.ravel(), weights=dbias[h].ravel(), minlength=nb) for h in range(H)], axis=1)
    return dW
'''
