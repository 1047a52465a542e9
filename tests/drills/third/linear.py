"""Third-set mistakes for linear."""

MISTAKES = [
    dict(label="dx returned flattened (N, Din) instead of the input's shape",
         keywords=["shape", "flatten", "reshape"],
         patch=[("dx = dy @ W ", "dx = dy2 @ W ")]),
    dict(label="the bias subtracted in the forward",
         keywords=["bias", "subtract"],
         patch=[("y = x @ W.T + b ", "y = x @ W.T - b ")]),
    dict(label="the input gradient's sign flipped (-(dy W))",
         keywords=["sign", "negat"],
         patch=[("dx = dy @ W ", "dx = -(dy @ W) ")]),
    dict(label="db from the first row only (not summed over the rows)",
         keywords=["first row", "summed over", "sum over"],
         patch=[("db = dy2.sum(axis=0) ", "db = dy2[0] ")]),
]

CORRECT = '''
import numpy as np


def linear_forward(x, W, b):
    return np.einsum("...i,oi->...o", x, W) + b, {"x": x, "W": W}


def linear_backward(dy, cache):
    x, W = cache["x"], cache["W"]
    axes = tuple(range(dy.ndim - 1))
    dx = np.einsum("...o,oi->...i", dy, W)
    dW = np.tensordot(dy, x, axes=(axes, axes))
    db = dy.sum(axis=axes)
    return dx, dW, db
'''
