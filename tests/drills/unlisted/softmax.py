"""Unlisted mistakes for softmax."""

MISTAKES = [
    dict(label="the rowsum(dy * y) term dropped",
         keywords=["rowsum", "row sum", "sum_i", "missing term"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * dy")]),
    dict(label="rowsum over the wrong axis (axis 0)",
         keywords=["axis", "dim"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * (dy - np.sum(dy * y, axis=0, keepdims=True))")]),
    dict(label="rowsum of dy without y (sum dy instead of sum dy * y)",
         keywords=["dy * y", "rowsum", "row sum", "weighted"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * (dy - np.sum(dy, axis=-1, keepdims=True))")]),
    dict(label="the backward sign flipped",
         keywords=["sign", "negat", "flip"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * (np.sum(dy * y, axis=-1, keepdims=True) - dy)")]),
    dict(label="forward normalises over the wrong axis",
         keywords=["axis", "dim"],
         patch=[("y = e / e.sum(axis=-1, keepdims=True) ", "y = e / e.sum(axis=0, keepdims=True) ")]),
    dict(label="the backward uses the Jacobian's diagonal only: y (1 - y) dy",
         keywords=["diagonal", "jacobian", "rowsum", "off-diagonal"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * (1 - y) * dy")]),
]

CORRECT = '''
import numpy as np


def softmax_forward(x):
    shifted = x - np.amax(x, axis=-1)[..., None]
    ex = np.exp(shifted)
    probs = ex / np.add.reduce(ex, axis=-1)[..., None]
    return probs, {"probs": probs}


def softmax_backward(dy, cache):
    p = cache["probs"]
    dot = np.einsum("...i,...i->...", dy, p)[..., None]
    return p * dy - p * dot
'''
