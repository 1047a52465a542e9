"""The embedding drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn


def embedding_forward(ids, W):
    m = nn.Embedding(*W.shape, dtype=np.float64)
    m.weight.data[...] = W
    return m(ids), m
def embedding_backward(dout, m):
    m.backward(dout)
    return m.weight.grad
