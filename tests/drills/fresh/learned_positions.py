"""Fresh unlisted mistakes for learned_positions."""

MISTAKES = [
    dict(label="the backward returns (dW, dx) in the wrong order",
         keywords=["order", "swap", "return"],
         patch=[("    return dy.copy(), dW", "    return dW, dy.copy()")]),
    dict(label="dW summed over the positions too (one row broadcast to every used row)",
         keywords=["sequence", "position", "axis", "sum"],
         patch=[("dW[offset:offset + s] = dy.sum(axis=0)", "dW[offset:offset + s] = dy.sum(axis=(0, 1))")]),
    dict(label="the forward's slice end forgets the offset (W[offset:S])",
         keywords=["offset", "slice", "end"],
         patch=[("return x + W[offset:offset + s], (W.shape, offset, s)", "return x + W[offset:s], (W.shape, offset, s)")]),
    dict(label="dW accumulated only from the last position's rows (dy[:, -1])",
         keywords=["position", "every position", "per position", "rows"],
         patch=[("dW[offset:offset + s] = dy.sum(axis=0)", "dW[offset:offset + s] = dy[:, -1].sum(axis=0)")]),
]

CORRECT = '''
import numpy as np


def learned_positions_forward(x, W, offset=0):
    idx = np.arange(offset, offset + x.shape[1])
    return x + np.take(W, idx, axis=0)[np.newaxis], {"idx": idx, "rows": W.shape[0], "d": W.shape[1]}


def learned_positions_backward(dy, cache):
    grad_table = np.zeros((cache["rows"], cache["d"]))
    np.add.at(grad_table, cache["idx"], np.einsum("bsd->sd", dy))
    return np.array(dy), grad_table
'''
