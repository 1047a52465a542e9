"""The causal_attention_kv_cache drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import functional as F


def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
    K, V = np.concatenate([k_cache, k_new], axis=2), np.concatenate([v_cache, v_new], axis=2)
    S, N = q.shape[-2], K.shape[-2]
    blocked = np.zeros((S, N), dtype=bool)
    blocked[:, N - S:] = F.causal_mask(S)     # the modules' convention: True = may NOT attend
    out, _ = F.scaled_dot_product_attention_forward(q, K, V, attn_mask=~blocked)
    return out, K, V
