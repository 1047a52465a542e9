"""The cross_entropy_options drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
    return F.cross_entropy_forward(logits, targets, ignore_index=ignore_index, label_smoothing=label_smoothing)
def cross_entropy_backward(dloss, cache): return F.cross_entropy_backward(dloss, cache)
