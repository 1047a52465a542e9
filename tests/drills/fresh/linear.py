"""Fresh unlisted mistakes for linear."""

MISTAKES = [
    dict(label="dx uses W^T (dy @ W.T) instead of dy @ W",
         keywords=["transpose", "dx", "w^t"],
         patch=[("dx = dy @ W ", "dx = dy @ W.T ")]),
    dict(label="db summed over the feature axis instead of the rows",
         keywords=["axis", "db", "sum"],
         patch=[("db = dy2.sum(axis=0) ", "db = dy2.sum(axis=1) ")]),
    dict(label="the forward forgets the bias",
         keywords=["bias", "+ b"],
         patch=[("y = x @ W.T + b ", "y = x @ W.T ")]),
    dict(label="dW sign flipped",
         keywords=["sign", "negat"],
         patch=[("dW = dy2.T @ x2 ", "dW = -(dy2.T @ x2) ")]),
]

CORRECT = '''
import numpy as np


def linear_forward(x, W, b):
    y = np.einsum("...i,oi->...o", x, W) + b
    return y, {"inp": x, "weight": W}


def linear_backward(dy, cache):
    x, W = cache["inp"], cache["weight"]
    dx = np.einsum("...o,oi->...i", dy, W)
    rows_dy = dy.reshape(-1, dy.shape[-1])
    dW = np.einsum("no,ni->oi", rows_dy, x.reshape(-1, x.shape[-1]))
    db = np.einsum("no->o", rows_dy)
    return dx, dW, db
'''
