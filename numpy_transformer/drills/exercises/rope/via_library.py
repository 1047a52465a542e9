"""The rope drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def rope_forward(x, positions, base=10000.0, interleaved=False): return F.rope_forward(x, positions, base, interleaved)
def rope_backward(dy, cache): return F.rope_backward(dy, cache)
