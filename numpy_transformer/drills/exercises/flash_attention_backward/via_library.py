"""The flash_attention_backward drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def flash_attention_backward(q, k, v, out, lse, dout, causal=False, block_q=2, block_k=2):
    o, cache = F.flash_attention_forward(q, k, v, is_causal=causal, block_q=block_q, block_k=block_k)
    return F.flash_attention_backward(dout, cache)
