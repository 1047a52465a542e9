"""Third-set mistakes for softmax."""

MISTAKES = [
    dict(label="the max subtracted per column (axis 0) instead of per row",
         keywords=["max", "axis", "column"],
         patch=[("z = x - x.max(axis=-1, keepdims=True)", "z = x - x.max(axis=0, keepdims=True)")]),
    dict(label="the row sum not multiplied by y (y dy - rowsum(dy y))",
         keywords=["parenthes", "row sum", "y factor"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * dy - np.sum(dy * y, axis=-1, keepdims=True)")]),
    dict(label="row mean instead of row sum of dy * y",
         keywords=["mean", "row sum", "1/v"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "return y * (dy - np.mean(dy * y, axis=-1, keepdims=True))")]),
    dict(label="normaliser from the unshifted exponentials (the shift not applied to the sum)",
         keywords=["shift", "normalis", "unshifted"],
         patch=[("y = e / e.sum(axis=-1, keepdims=True)", "y = e / np.exp(x).sum(axis=-1, keepdims=True)")]),
]

CORRECT = '''
import numpy as np


def softmax_forward(x):
    lse = np.logaddexp.reduce(x, axis=-1, keepdims=True)
    y = np.exp(x - lse)
    return y, {"y": y}


def softmax_backward(dy, cache):
    y = cache["y"]
    dot = np.einsum("...v,...v->...", dy, y)[..., None]
    return y * dy - y * dot
'''
