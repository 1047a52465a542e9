"""The alibi drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def alibi_slopes(num_heads): return F.alibi_slopes(num_heads)
def alibi_bias(num_heads, s, t): return F.alibi_bias(num_heads, s, t)
