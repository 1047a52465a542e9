"""The scaled_dot_product_attention drill answered by the library itself, through the skeleton's signatures:
a test grades it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import functional as F


def attention_forward(q, k, v, mask=None, causal=False):
    if mask is None:                          # the drill's mask: True = may NOT attend; the library's: True = may
        return F.scaled_dot_product_attention_forward(q, k, v, is_causal=causal)
    blocked = mask | F.causal_mask(q.shape[-2], k.shape[-2]) if causal else mask
    return F.scaled_dot_product_attention_forward(q, k, v, attn_mask=~blocked)
def attention_backward(dout, cache): return F.scaled_dot_product_attention_backward(dout, cache)
