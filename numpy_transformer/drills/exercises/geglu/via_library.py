"""The geglu drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def geglu_forward(x, W_gate, W_up, W_down): return F.geglu_forward(x, W_gate, W_up, W_down)
def geglu_backward(dy, cache): return F.geglu_backward(dy, cache)[:4]
