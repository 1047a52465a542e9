"""Unlisted mistakes for geglu."""

MISTAKES = [
    dict(label="dW_gate transposed (x^T dg instead of dg^T x)",
         keywords=["transpose", "dw_gate", "shape"],
         patch=[("dW_gate = dg.reshape(-1, F).T @ x2 ", "dW_gate = x2.T @ dg.reshape(-1, F) ")]),
    dict(label="gelu pdf missing its 1/sqrt(2 pi) normalisation",
         keywords=["sqrt(2", "pdf", "normal", "factor"],
         patch=[("pdf = np.exp(-0.5 * g * g) / math.sqrt(2.0 * math.pi)", "pdf = np.exp(-0.5 * g * g)")]),
    dict(label="forward: erf(g) instead of erf(g / sqrt(2))",
         keywords=["sqrt(2)", "erf", "cdf"],
         patch=[("cdf = 0.5 * (1.0 + _erf(g / math.sqrt(2.0)))", "cdf = 0.5 * (1.0 + _erf(g))")]),
    dict(label="up branch's gradient uses the pre-activation g instead of gelu(g)",
         keywords=["up", "gelu(g)", "other factor", "product rule"],
         patch=[("    du = dh * a\n", "    du = dh * g\n")]),
    dict(label="gelu slope with the wrong sign on g * phi(g)",
         keywords=["sign", "pdf", "gelu", "derivative"],
         patch=[("dg = da * (cdf + g * pdf)", "dg = da * (cdf - g * pdf)")]),
    dict(label="dW_up uses dh instead of du (forgets the gelu(g) factor)",
         keywords=["dw_up", "du", "missing factor", "product rule"],
         patch=[("dW_up = du.reshape(-1, F).T @ x2 ", "dW_up = dh.reshape(-1, F).T @ x2 ")]),
    dict(label="dW_down averaged over the rows (divided by N)",
         keywords=["1/n", "mean", "factor", "dw_down"],
         patch=[("dW_down = dy2.T @ h2 ", "dW_down = dy2.T @ h2 / dy2.shape[0] ")]),
]

CORRECT = '''
import math

import numpy as np


def _Phi(z):
    flat = [0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in z.ravel()]
    return np.array(flat, dtype=np.float64).reshape(z.shape)


def geglu_forward(x, W_gate, W_up, W_down):
    gate = np.einsum("...d,fd->...f", x, W_gate)
    up = np.einsum("...d,fd->...f", x, W_up)
    Phi = _Phi(gate)
    act = gate * Phi
    hidden = act * up
    out = np.einsum("...f,df->...d", hidden, W_down)
    return out, {"x": x, "Wg": W_gate, "Wu": W_up, "Wd": W_down,
                 "gate": gate, "up": up, "Phi": Phi, "act": act, "hidden": hidden}


def geglu_backward(dy, cache):
    c = cache
    axes = tuple(range(dy.ndim - 1))
    dW_down = np.tensordot(dy, c["hidden"], axes=(axes, axes))
    dhidden = np.einsum("...d,df->...f", dy, c["Wd"])
    phi = np.exp(-np.square(c["gate"]) / 2.0) / np.sqrt(2.0 * np.pi)
    dgate = dhidden * c["up"] * (c["Phi"] + c["gate"] * phi)
    dup = dhidden * c["act"]
    dW_gate = np.tensordot(dgate, c["x"], axes=(axes, axes))
    dW_up = np.tensordot(dup, c["x"], axes=(axes, axes))
    dx = np.einsum("...f,fd->...d", dgate, c["Wg"]) + np.einsum("...f,fd->...d", dup, c["Wu"])
    return dx, dW_gate, dW_up, dW_down
'''
