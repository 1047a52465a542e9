"""Third-set mistakes for swiglu."""

MISTAKES = [
    dict(label="the gate's gradient skips the up factor (dh instead of dh * u)",
         keywords=["up branch", "factor u", "product rule"],
         patch=[("dg = da * (s + g * s * (1.0 - s))", "dg = dh * (s + g * s * (1.0 - s))")]),
    dict(label="up branch's gradient uses the pre-activation g instead of silu(g)",
         keywords=["silu(g)", "pre-activation", "up branch"],
         patch=[("du = dh * a\n", "du = dh * g\n")]),
    dict(label="branches added instead of multiplied (h = silu(g) + u)",
         keywords=["multipl", "added", "product"],
         patch=[("h = a * u ", "h = a + u ")]),
    dict(label="stable sigmoid with exp(-g) instead of exp(-|g|): wrong for negative g",
         keywords=["sigmoid", "negative", "abs", "|g|"],
         patch=[("e = np.exp(-np.abs(z))", "e = np.exp(-z)")]),
]

CORRECT = '''
import numpy as np


def swiglu_forward(x, W_gate, W_up, W_down):
    g = np.einsum("...d,fd->...f", x, W_gate)
    u = np.einsum("...d,fd->...f", x, W_up)
    sig = np.exp(-np.logaddexp(0.0, -g))
    h = g * sig * u
    return np.einsum("...f,df->...d", h, W_down), (x, W_gate, W_up, W_down, g, u, sig, h)


def swiglu_backward(dy, cache):
    x, Wg, Wu, Wd, g, u, sig, h = cache
    F = h.shape[-1]
    D = x.shape[-1]
    dh = dy @ Wd
    dgate = dh * u * sig * (1.0 + g * (1.0 - sig))
    dup = dh * g * sig
    dWd = dy.reshape(-1, D).T @ h.reshape(-1, F)
    dWg = dgate.reshape(-1, F).T @ x.reshape(-1, D)
    dWu = dup.reshape(-1, F).T @ x.reshape(-1, D)
    return dgate @ Wg + dup @ Wu, dWg, dWu, dWd
'''
