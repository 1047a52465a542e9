"""Third-set mistakes for learned_positions."""

MISTAKES = [
    dict(label="the backward's rows shifted by one (dW[offset + 1:offset + S + 1])",
         keywords=["off by one", "shift", "off-by-one"],
         patch=[("dW[offset:offset + s] = dy.sum(axis=0)", "dW[offset + 1:offset + s + 1] = dy.sum(axis=0)")]),
    dict(label="positions multiplied into x instead of added",
         keywords=["multipl", "added", "addition"],
         patch=[("return x + W[offset:offset + s], (W.shape, offset, s)", "return x * W[offset:offset + s], (W.shape, offset, s)")]),
    dict(label="dW allocated in float32 (precision lost)",
         keywords=["float32", "dtype", "precision"],
         patch=[("dW = np.zeros(shape)", "dW = np.zeros(shape, dtype=np.float32)")]),
    dict(label="one row W[offset] added at every position (not one row per position)",
         keywords=["one row", "per position", "every position"],
         patch=[("return x + W[offset:offset + s], (W.shape, offset, s)", "return x + W[offset], (W.shape, offset, s)")]),
]

CORRECT = '''
import numpy as np


def learned_positions_forward(x, W, offset=0):
    rows = np.arange(offset, offset + x.shape[1])
    return x + np.take(W, rows, axis=0)[None], (rows, W.shape)


def learned_positions_backward(dy, cache):
    rows, shape = cache
    dW = np.zeros(shape, dtype=np.float64)
    for b in range(dy.shape[0]):
        dW[rows] += dy[b]
    return np.array(dy, copy=True), dW
'''
