"""Third-set mistakes for geglu."""

MISTAKES = [
    dict(label="gelu pdf exp(-g^2) instead of exp(-g^2/2)",
         keywords=["pdf", "exponent", "phi"],
         patch=[("pdf = np.exp(-0.5 * g * g)", "pdf = np.exp(-g * g)")]),
    dict(label="gate and up projections swapped (gelu on x W_up^T)",
         keywords=["swapped", "gate and up", "projections"],
         patch=[("g = x @ W_gate.T ", "g = x @ W_up.T "), ("u = x @ W_up.T ", "u = x @ W_gate.T ")]),
    dict(label="gelu derivative Phi + phi: the g factor on phi(g) dropped",
         keywords=["product rule", "g * phi", "factor"],
         patch=[("dg = da * (cdf + g * pdf)", "dg = da * (cdf + pdf)")]),
    dict(label="the gate's gradient skips the up factor (dh instead of dh * u)",
         keywords=["up branch", "factor u", "product rule"],
         patch=[("da = dh * u\n", "da = dh\n")]),
]

CORRECT = '''
import math

import numpy as np


def _Phi(z):
    flat = [0.5 * math.erfc(-t / math.sqrt(2.0)) for t in np.ravel(z)]
    return np.array(flat, dtype=np.float64).reshape(np.shape(z))


def geglu_forward(x, W_gate, W_up, W_down):
    pre = np.einsum("...d,fd->...f", x, W_gate)
    up = np.einsum("...d,fd->...f", x, W_up)
    Phi = _Phi(pre)
    hid = pre * Phi * up
    return np.einsum("...f,df->...d", hid, W_down), (x, W_gate, W_up, W_down, pre, up, Phi, hid)


def geglu_backward(dy, cache):
    x, Wg, Wu, Wd, pre, up, Phi, hid = cache
    lead = "abcdefgh"[: x.ndim - 1]
    dWd = np.einsum(f"{lead}d,{lead}f->df", dy, hid)
    dh = np.einsum("...d,df->...f", dy, Wd)
    dup = dh * pre * Phi
    dpre = dh * up * (Phi + pre * np.exp(-pre ** 2 / 2.0) / math.sqrt(2.0 * math.pi))
    dWg = np.einsum(f"{lead}f,{lead}d->fd", dpre, x)
    dWu = np.einsum(f"{lead}f,{lead}d->fd", dup, x)
    return dpre @ Wg + dup @ Wu, dWg, dWu, dWd
'''
