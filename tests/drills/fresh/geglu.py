"""Fresh unlisted mistakes for geglu."""

MISTAKES = [
    dict(label="the forward uses the tanh approximation of gelu (the backward is the exact one)",
         keywords=["tanh", "approximat", "exact", "erf"],
         patch=[("    cdf = 0.5 * (1.0 + _erf(g / math.sqrt(2.0)))                # Phi(g)\n",
                 "    cdf = 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))\n")]),
    dict(label="gelu's derivative misses the Phi(g) term (only g * phi(g))",
         keywords=["product rule", "cdf", "phi(g)", "derivative"],
         patch=[("dg = da * (cdf + g * pdf) ", "dg = da * (g * pdf) ")]),
    dict(label="dx only through the up branch (the gate branch's dg @ W_gate dropped)",
         keywords=["gate", "branch", "path", "dx"],
         patch=[("dx = dg @ W_gate + du @ W_up ", "dx = du @ W_up ")]),
    dict(label="dW_gate computed from du instead of dg",
         keywords=["dw_gate", "gate", "dg"],
         patch=[("dW_gate = dg.reshape(-1, F).T @ x2 ", "dW_gate = du.reshape(-1, F).T @ x2 ")]),
    dict(label="dW_down from gelu(g) instead of the hidden product h",
         keywords=["dw_down", "down", "hidden", "h = a * u"],
         patch=[("dW_down = dy2.T @ h2 ", "dW_down = dy2.T @ a.reshape(-1, F) ")]),
]

CORRECT = '''
import math

import numpy as np

_ERF = np.frompyfunc(math.erf, 1, 1)


def _phi_cdf(z):
    return 0.5 + 0.5 * _ERF(z * (0.5 ** 0.5)).astype(np.float64)


def geglu_forward(x, W_gate, W_up, W_down):
    pre_gate = np.einsum("...d,fd->...f", x, W_gate)
    pre_up = np.einsum("...d,fd->...f", x, W_up)
    act = pre_gate * _phi_cdf(pre_gate)
    hidden = act * pre_up
    y = np.einsum("...f,df->...d", hidden, W_down)
    return y, {"x": x, "Wg": W_gate, "Wu": W_up, "Wd": W_down, "zg": pre_gate, "zu": pre_up,
               "act": act, "hid": hidden}


def geglu_backward(dy, cache):
    c = cache
    lead = tuple(range(dy.ndim - 1))
    d_hid = np.einsum("...d,df->...f", dy, c["Wd"])
    dW_down = np.tensordot(dy, c["hid"], axes=(lead, lead))
    zg = c["zg"]
    slope = _phi_cdf(zg) + zg * np.exp(-zg ** 2 / 2) / np.sqrt(2 * np.pi)
    d_zg = d_hid * c["zu"] * slope
    d_zu = d_hid * c["act"]
    dW_gate = np.tensordot(d_zg, c["x"], axes=(lead, lead))
    dW_up = np.tensordot(d_zu, c["x"], axes=(lead, lead))
    dx = np.einsum("...f,fd->...d", d_zg, c["Wg"]) + np.einsum("...f,fd->...d", d_zu, c["Wu"])
    return dx, dW_gate, dW_up, dW_down
'''
