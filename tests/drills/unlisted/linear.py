"""Unlisted mistakes for linear."""

MISTAKES = [
    dict(label="dW transposed (x^T dy instead of dy^T x)",
         keywords=["transpose", "dw"],
         patch=[("dW = dy2.T @ x2 ", "dW = x2.T @ dy2 ")]),
    dict(label="db averaged over rows instead of summed",
         keywords=["mean", "sum", "1/n", "db"],
         patch=[("db = dy2.sum(axis=0)", "db = dy2.mean(axis=0)")]),
    dict(label="dW averaged over rows (divided by N)",
         keywords=["1/n", "mean", "factor", "dw"],
         patch=[("dW = dy2.T @ x2 ", "dW = dy2.T @ x2 / x2.shape[0] ")]),
    dict(label="dW from the first leading row only (3-D inputs: batch not summed)",
         keywords=["leading", "batch", "sum", "reshape"],
         patch=[("x2 = x.reshape(-1, x.shape[-1])                             # (N, Din)",
                 "x2 = x.reshape(-1, x.shape[-2], x.shape[-1])[0] if x.ndim > 2 else x"),
                ("dy2 = dy.reshape(-1, dy.shape[-1])                          # (N, Dout)",
                 "dy2 = dy.reshape(-1, dy.shape[-2], dy.shape[-1])[0] if dy.ndim > 2 else dy")]),
    dict(label="dx computed with x in place of dy",
         keywords=["dy", "dx", "input", "upstream"],
         patch=[("dx = dy @ W ", "dx = (x @ W.T) @ W ")]),
]

CORRECT = '''
import numpy as np


def linear_forward(x, W, b):
    out = np.tensordot(x, W, axes=([-1], [1])) + b
    return out, {"x": x, "W": W}


def linear_backward(dy, cache):
    x, W = cache["x"], cache["W"]
    dx = np.tensordot(dy, W, axes=([-1], [0]))
    lead = tuple(range(dy.ndim - 1))
    dW = np.tensordot(dy, x, axes=(lead, lead))
    db = dy.sum(axis=lead)
    return dx, dW, db
'''
