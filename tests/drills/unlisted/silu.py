"""Unlisted mistakes for silu."""

MISTAKES = [
    dict(label="stable sigmoid branches swapped (e where x >= 0)",
         keywords=["branch", "stable", "sigmoid", "x >= 0"],
         patch=[("return np.where(x >= 0, 1.0, e) / (1.0 + e)", "return np.where(x >= 0, e, 1.0) / (1.0 + e)")]),
    dict(label="product rule: the x * s * (1 - s) term missing",
         keywords=["product rule", "missing term", "x * s"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * s")]),
    dict(label="sigmoid derivative s * s instead of s * (1 - s)",
         keywords=["1 - s", "sigmoid", "derivative"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (s + x * s * s)")]),
    dict(label="the backward forgets dy",
         keywords=["dy", "upstream"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return (s + x * s * (1.0 - s)) + 0 * dy")]),
    dict(label="product-rule factors swapped: x + s * s * (1 - s)",
         keywords=["product rule", "swap", "factor"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (x + s * s * (1.0 - s))")]),
    dict(label="forward y = sigmoid(x) (the x factor dropped)",
         keywords=["x * sigmoid", "forward", "factor"],
         patch=[("    return x * s, (x, s)\n", "    return s, (x, s)\n")]),
]

CORRECT = '''
import numpy as np


def _sig(z):
    out = np.empty_like(z, dtype=np.float64)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def silu_forward(x):
    sg = _sig(x)
    return sg * x, (sg, x)


def silu_backward(dy, cache):
    sg, x = cache
    return dy * sg * (1.0 + x * (1.0 - sg))
'''
