"""Fresh unlisted mistakes for softmax."""

MISTAKES = [
    dict(label="the backward's row sum without keepdims (broadcast along the wrong axis)",
         keywords=["keepdims", "broadcast", "axis"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True)) ", "return y * (dy - np.sum(dy * y, axis=-1)) ")]),
    dict(label="the outer factor y dropped: dx = dy - rowsum(dy * y)",
         keywords=["jacobian", "multiply by y", "missing y", "y *"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True)) ", "return dy - np.sum(dy * y, axis=-1, keepdims=True) ")]),
    dict(label="the cache keeps the unnormalised exponentials instead of y",
         keywords=["cache", "unnormali", "exp", "normalis"],
         patch=[("    return y, y ", "    return y, e ")]),
    dict(label="log-softmax's backward used: dx = dy - y rowsum(dy)",
         keywords=["log-softmax", "log softmax", "logsoftmax"],
         patch=[("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True)) ", "return dy - y * np.sum(dy, axis=-1, keepdims=True) ")]),
]

CORRECT = '''
import numpy as np


def softmax_forward(x):
    out = np.exp(x - np.max(x, axis=-1, keepdims=True))
    out /= np.sum(out, axis=-1, keepdims=True)
    return out, {"out": out}


def softmax_backward(dy, cache):
    s = cache["out"]
    return s * dy - s * np.einsum("...v,...v->...", s, dy)[..., None]
'''
