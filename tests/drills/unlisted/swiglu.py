"""Unlisted mistakes for swiglu."""

MISTAKES = [
    dict(label="product-rule factors swapped: da = dh * a, du = dh * u",
         keywords=["product rule", "swap", "factor"],
         patch=[("    da = dh * u\n    du = dh * a\n", "    da = dh * a\n    du = dh * u\n")]),
    dict(label="dx only through the gate branch (du @ W_up dropped)",
         keywords=["both branches", "dx", "w_up", "missing term"],
         patch=[("dx = dg @ W_gate + du @ W_up ", "dx = dg @ W_gate ")]),
    dict(label="silu derivative missing the g * s * (1 - s) term",
         keywords=["silu", "product rule", "missing term", "derivative"],
         patch=[("dg = da * (s + g * s * (1.0 - s))", "dg = da * s")]),
    dict(label="stable sigmoid branches swapped",
         keywords=["branch", "stable", "sigmoid"],
         patch=[("return np.where(z >= 0, 1.0, e) / (1.0 + e)", "return np.where(z >= 0, e, 1.0) / (1.0 + e)")]),
    dict(label="dW_down transposed (h^T dy instead of dy^T h)",
         keywords=["transpose", "dw_down", "shape"],
         patch=[("dW_down = dy2.T @ h2 ", "dW_down = h2.T @ dy2 ")]),
    dict(label="silu applied to the up branch instead of the gate",
         keywords=["gate", "up", "branch", "swap"],
         patch=[("    s = _sigmoid(g)\n    a = g * s ", "    g, u = u, g\n    s = _sigmoid(g)\n    a = g * s ")]),
]

CORRECT = '''
import numpy as np


def _silu_parts(z):
    sig = 0.5 * (1.0 + np.tanh(0.5 * z))
    return z * sig, sig


def swiglu_forward(x, W_gate, W_up, W_down):
    gate = np.einsum("...d,fd->...f", x, W_gate)
    up = np.einsum("...d,fd->...f", x, W_up)
    act, sig = _silu_parts(gate)
    hidden = act * up
    out = np.einsum("...f,df->...d", hidden, W_down)
    return out, dict(x=x, Wg=W_gate, Wu=W_up, Wd=W_down, gate=gate, up=up, act=act, sig=sig, hidden=hidden)


def swiglu_backward(dy, cache):
    c = cache
    lead = "".join("abcegh"[: dy.ndim - 1])
    dW_down = np.einsum(f"{lead}d,{lead}f->df", dy, c["hidden"])
    dhidden = np.einsum("...d,df->...f", dy, c["Wd"])
    dup = dhidden * c["act"]
    dgate = dhidden * c["up"] * (c["sig"] * (1.0 + c["gate"] * (1.0 - c["sig"])))
    dW_gate = np.einsum(f"{lead}f,{lead}d->fd", dgate, c["x"])
    dW_up = np.einsum(f"{lead}f,{lead}d->fd", dup, c["x"])
    dx = np.einsum("...f,fd->...d", dgate, c["Wg"]) + np.einsum("...f,fd->...d", dup, c["Wu"])
    return dx, dW_gate, dW_up, dW_down
'''
