"""Unlisted mistakes for learned_positions."""

MISTAKES = [
    dict(label="the forward ignores the offset (rows 0:S used)",
         keywords=["offset", "rows 0:s"],
         patch=[("return x + W[offset:offset + s], (W.shape, offset, s)", "return x + W[:s], (W.shape, offset, s)")]),
    dict(label="the backward writes dW at rows 0:S, ignoring the offset",
         keywords=["offset", "rows 0:s"],
         patch=[("dW[offset:offset + s] = dy.sum(axis=0)", "dW[:s] = dy.sum(axis=0)")]),
    dict(label="dW averaged over the batch instead of summed",
         keywords=["mean", "sum", "batch", "1/b"],
         patch=[("dW[offset:offset + s] = dy.sum(axis=0)", "dW[offset:offset + s] = dy.mean(axis=0)")]),
    dict(label="the backward returns no dx gradient through the add (dx = 0)",
         keywords=["dx", "residual", "pass"],
         patch=[("    return dy.copy(), dW\n", "    return np.zeros_like(dy), dW\n")]),
    dict(label="dx sign flipped",
         keywords=["sign", "negat", "dx"],
         patch=[("    return dy.copy(), dW\n", "    return -dy, dW\n")]),
    dict(label="dW taken from the first batch row only",
         keywords=["batch", "sum", "row"],
         patch=[("dW[offset:offset + s] = dy.sum(axis=0)", "dW[offset:offset + s] = dy[0]")]),
]

CORRECT = '''
import numpy as np


def learned_positions_forward(x, W, offset=0):
    positions = np.arange(offset, offset + x.shape[1])
    return x + W[positions][None, :, :], (positions, W.shape)


def learned_positions_backward(dy, cache):
    positions, shape = cache
    grad_table = np.zeros(shape, dtype=dy.dtype)
    np.add.at(grad_table, positions, np.einsum("bsd->sd", dy))
    return np.array(dy), grad_table
'''
