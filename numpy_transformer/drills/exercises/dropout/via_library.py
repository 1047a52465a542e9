"""The dropout drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def dropout_forward(x, p, rng, training=True): return F.dropout_forward(x, p, training=training, rng=rng)
def dropout_backward(dy, cache): return F.dropout_backward(dy, cache)
