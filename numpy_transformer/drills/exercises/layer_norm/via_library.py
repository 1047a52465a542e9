"""The layer_norm drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def layer_norm_forward(x, gamma, beta, eps=1e-5): return F.layer_norm_forward(x, gamma, beta, eps)
def layer_norm_backward(dy, cache): return F.layer_norm_backward(dy, cache)
