"""Fresh unlisted mistakes for silu."""

MISTAKES = [
    dict(label="product rule written as a product: s * x s (1 - s) instead of s + x s (1 - s)",
         keywords=["product rule", "sum of", "added"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (s * x * s * (1.0 - s))")]),
    dict(label="the sigmoid's derivative written (1 - s) without the s factor",
         keywords=["sigmoid derivative", "s(1-s)", "s * (1 - s)", "derivative"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (s + x * (1.0 - s))")]),
    dict(label="the cache keeps the output y in place of x (the backward uses y)",
         keywords=["cache", "output", "input"],
         patch=[("    return x * s, (x, s)", "    return x * s, (x * s, s)")]),
    dict(label="the sigmoid's derivative written s (1 + s)",
         keywords=["sign", "1 - s", "sigmoid derivative", "derivative"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (s + x * s * (1.0 + s))")]),
    dict(label="product rule: the s term dropped (only x s (1 - s))",
         keywords=["product rule", "missing term", "the s term"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (x * s * (1.0 - s))")]),
]

CORRECT = '''
import numpy as np


def silu_forward(x):
    sig = 0.5 * (1.0 + np.tanh(0.5 * x))
    return x * sig, {"x": x, "sig": sig}


def silu_backward(dy, cache):
    x, sig = cache["x"], cache["sig"]
    return dy * sig * (1.0 + x * (1.0 - sig))
'''
