"""The learned_positions drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn


def learned_positions_forward(x, W, offset=0):
    m = nn.LearnedPositionalEmbedding(W.shape[0], W.shape[1], dtype=np.float64)
    m.weight.data[...] = W
    return m(x, offset=offset), m
def learned_positions_backward(dy, m):
    return m.backward(dy), m.weight.grad
