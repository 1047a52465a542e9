"""The cross_attention drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn


def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
    m = nn.MultiheadAttention(x.shape[-1], num_heads, bias=False, batch_first=True, dtype=np.float64)
    m.in_proj_weight.data[...] = np.concatenate([Wq, Wk, Wv])
    m.out_proj.weight.data[...] = Wo
    out, _ = m(x, memory, memory, key_padding_mask=memory_key_padding_mask, need_weights=False)
    return out, m
def cross_attention_backward(dout, m):
    dq, dk, dv = m.backward(dout)
    dWq, dWk, dWv = np.split(m.in_proj_weight.grad, 3)
    return dq, dk + dv, dWq, dWk, dWv, m.out_proj.weight.grad
