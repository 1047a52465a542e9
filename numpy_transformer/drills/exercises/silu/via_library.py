"""The silu drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def silu_forward(x): return F.silu_forward(x)
def silu_backward(dy, cache): return F.silu_backward(dy, cache)
