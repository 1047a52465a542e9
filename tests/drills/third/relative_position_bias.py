"""Third-set mistakes for relative_position_bias."""

MISTAKES = [
    dict(label="log base mixed: log10 in the numerator, the natural log in the denominator",
         keywords=["log10", "log base", "logarithm base"],
         patch=[("np.log(n / max_exact) / np.log(", "np.log10(n / max_exact) / np.log(")]),
    dict(label="log range scaled by num_buckets instead of num_buckets - max_exact",
         keywords=["num_buckets - max_exact", "log range", "logarithmic"],
         patch=[("* (num_buckets - max_exact)", "* num_buckets")]),
    dict(label="bias axes (2, 1, 0): queries and keys swapped",
         keywords=["transpose", "axes", "swapped"],
         patch=[("return W[buckets].transpose(2, 0, 1), (buckets, W.shape)", "return W[buckets].transpose(2, 1, 0), (buckets.T, W.shape)")]),
    dict(label="bidirectional: the distance not made absolute (n = rel)",
         keywords=["absolute", "abs", "distance"],
         patch=[("n = np.abs(rel)", "n = rel")]),
]

CORRECT = '''
import math

import numpy as np


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    rel = np.asarray(relative_position)
    out = np.empty(rel.shape, dtype=np.int64)
    for idx, r in np.ndenumerate(rel):
        r = int(r)
        nb, base = num_buckets, 0
        if bidirectional:
            nb //= 2
            if r > 0:
                base = nb
            d = abs(r)
        else:
            d = max(-r, 0)
        exact = nb // 2
        if d < exact:
            out[idx] = base + d
        else:
            b = exact + int(math.log(d / exact) / math.log(max_distance / exact) * (nb - exact))
            out[idx] = base + min(b, nb - 1)
    return out


def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
    qpos = np.arange(S) + (T - S)
    rel = np.arange(T)[None, :] - qpos[:, None]
    b = relative_position_bucket(rel, bidirectional, W.shape[0], max_distance)
    return np.moveaxis(W[b], -1, 0), (b, W.shape[0])


def relative_position_bias_backward(dbias, cache):
    b, nb = cache
    onehot = (b[..., None] == np.arange(nb)).astype(dbias.dtype)   # (S, T, NB)
    return np.einsum("stn,hst->nh", onehot, dbias)
'''
