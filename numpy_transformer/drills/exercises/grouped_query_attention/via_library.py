"""The grouped_query_attention drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def gqa_forward(q, k, v, causal=False):
    return F.scaled_dot_product_attention_forward(q, k, v, is_causal=causal, enable_gqa=True)
def gqa_backward(dout, cache): return F.scaled_dot_product_attention_backward(dout, cache)
