"""The multi_head_attention drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import functional as F
from numpy_transformer import nn


def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
    S, D = x.shape[1], x.shape[2]
    m = nn.MultiheadAttention(D, num_heads, bias=False, batch_first=True, dtype=np.float64)
    m.in_proj_weight.data[...] = np.concatenate([Wq, Wk, Wv])
    m.out_proj.weight.data[...] = Wo
    if causal:
        mask = F.causal_mask(S) if mask is None else (mask | F.causal_mask(S))
    out, _ = m(x, x, x, attn_mask=mask, need_weights=False)
    return out, m
def mha_backward(dout, m):
    dq, dk, dv = m.backward(dout)
    dWq, dWk, dWv = np.split(m.in_proj_weight.grad, 3)
    return dq + dk + dv, dWq, dWk, dWv, m.out_proj.weight.grad
