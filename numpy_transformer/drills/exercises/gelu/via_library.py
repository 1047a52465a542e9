"""The gelu drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def gelu_forward(x, approximate="none"): return F.gelu_forward(x, approximate)
def gelu_backward(dy, cache): return F.gelu_backward(dy, cache)
