"""The positional_encoding drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn


def positional_encoding(S, D): return nn.sinusoidal_table(S, D, np.float64)
