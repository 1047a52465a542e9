"""The linear drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn


def linear_forward(x, W, b):
    m = nn.Linear(W.shape[1], W.shape[0], dtype=np.float64)
    m.weight.data[...] = W
    m.bias.data[...] = b
    return m(x), m
def linear_backward(dy, m):
    dx = m.backward(dy)
    return dx, m.weight.grad, m.bias.grad
