"""GeGLU feed-forward y = (gelu(x W_gate^T) * (x W_up^T)) W_down^T, forward and backward."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[float])  # NumPy has no erf; math.erf elementwise is fine here


def geglu_forward(x, W_gate, W_up, W_down):
    """x (N..., D), W_gate and W_up (F, D), W_down (D, F) -> (y (N..., D), cache)."""
    g = x @ W_gate.T                                            # (N..., F) the gate branch
    u = x @ W_up.T                                              # (N..., F) the up branch
    cdf = 0.5 * (1.0 + _erf(g / math.sqrt(2.0)))                # Phi(g)
    a = g * cdf                                                 # gelu(g), exact
    h = a * u                                                   # (N..., F)
    y = h @ W_down.T                                            # (N..., D)
    return y, (x, W_gate, W_up, W_down, g, cdf, a, u, h)


def geglu_backward(dy, cache):
    """dy (N..., D) -> (dx, dW_gate, dW_up, dW_down).

    y = h W_down^T:   dh = dy W_down,   dW_down = dy^T h
    h = a * u:        da = dh * u,      du = dh * a          (product rule: the other factor)
    a = gelu(g):      dg = da * (Phi(g) + g * phi(g))        (gelu = g * Phi(g), a product too)
    g, u linear in x: dW_gate = dg^T x, dW_up = du^T x, dx = dg W_gate + du W_up (x feeds both)
    """
    x, W_gate, W_up, W_down, g, cdf, a, u, h = cache
    D, F = W_down.shape
    dy2, h2, x2 = dy.reshape(-1, D), h.reshape(-1, F), x.reshape(-1, D)
    dW_down = dy2.T @ h2                                        # (D, F)
    dh = dy @ W_down                                            # (N..., F)
    da = dh * u
    du = dh * a
    pdf = np.exp(-0.5 * g * g) / math.sqrt(2.0 * math.pi)       # phi(g)
    dg = da * (cdf + g * pdf)                                   # through gelu
    dW_gate = dg.reshape(-1, F).T @ x2                          # (F, D)
    dW_up = du.reshape(-1, F).T @ x2                            # (F, D)
    dx = dg @ W_gate + du @ W_up                                # (N..., D): both branches
    return dx, dW_gate, dW_up, dW_down
