"""The rms_norm drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def rms_norm_forward(x, gamma, eps=1e-6): return F.rms_norm_forward(x, gamma, eps)
def rms_norm_backward(dy, cache): return F.rms_norm_backward(dy, cache)
