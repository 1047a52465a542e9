"""Drill: causal self-attention with a KV cache, one decoding step (or a chunk of S new positions).

A decoder that generates token by token does not recompute the keys and values of the T positions
it has already seen: it keeps them in a cache. For the S new positions (S = 1 when decoding one
token; S > 1 for a chunk of a prompt) it gets their q, k, v, appends k and v to the cache, and
attends. The result must equal the LAST S rows of the full causal attention over all T + S
positions.

Shape letters: B batch, H heads, T cached positions (T = 0 at the first step), S new positions,
Dh query/key width, Dv value width.

    K = [k_cache ; k_new]   V = [v_cache ; v_new]          (along the positions axis, new ones last)
    out = softmax(q K^T / sqrt(Dh) + M) V                   new position i (absolute T + i) may not
                                                            attend key j > T + i: M = -inf there

Conventions (the grader checks them):
* returns (out, k_cache, v_cache): out (B, H, S, Dv) and the UPDATED caches (B, H, T + S, Dh) and
  (B, H, T + S, Dv), the new entries at the end (the next step receives them);
* no cache of anything else, no backward (this is inference); float64; do not modify the inputs in
  place (return new arrays).

Hints:
* Think of the full (T + S, T + S) causal mask: which of its rows belong to the new positions?
* With S = 1 the new position may attend every key, itself included.
"""

import numpy as np


def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
    """Causal attention of S new positions over the cache and themselves.

    Parameters
    ----------
    q : ndarray, shape (B, H, S, Dh)
    k_new : ndarray, shape (B, H, S, Dh)
    v_new : ndarray, shape (B, H, S, Dv)
    k_cache : ndarray, shape (B, H, T, Dh), T >= 0
    v_cache : ndarray, shape (B, H, T, Dv)

    Returns
    -------
    out : ndarray, shape (B, H, S, Dv)
    k_cache : ndarray, shape (B, H, T + S, Dh), the updated cache
    v_cache : ndarray, shape (B, H, T + S, Dv)
    """
    raise NotImplementedError
