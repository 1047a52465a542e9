"""The softmax drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def softmax_forward(x): return F.softmax_forward(x)
def softmax_backward(dy, cache): return F.softmax_backward(dy, cache)
