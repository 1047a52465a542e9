"""The relative_position_bias drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    from numpy_transformer import functional as F
    return F.relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance)
def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
    m = nn.RelativePositionBias(W.shape[1], W.shape[0], max_distance, bidirectional, dtype=np.float64)
    m.relative_attention_bias.weight.data[...] = W
    return m(S, T), m
def relative_position_bias_backward(dbias, m):
    m.backward(dbias)
    return m.relative_attention_bias.weight.grad
