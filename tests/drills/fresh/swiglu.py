"""Fresh unlisted mistakes for swiglu."""

MISTAKES = [
    dict(label="silu's derivative taken as the sigmoid's: s (1 - s)",
         keywords=["silu", "derivative", "product rule"],
         patch=[("dg = da * (s + g * s * (1.0 - s)) ", "dg = da * (s * (1.0 - s)) ")]),
    dict(label="dW_up computed from dg instead of du",
         keywords=["dw_up", "du", "up"],
         patch=[("dW_up = du.reshape(-1, F).T @ x2 ", "dW_up = dg.reshape(-1, F).T @ x2 ")]),
    dict(label="dx pairs each branch's gradient with the other branch's weight",
         keywords=["w_gate", "w_up", "swap", "branch"],
         patch=[("dx = dg @ W_gate + du @ W_up ", "dx = dg @ W_up + du @ W_gate ")]),
    dict(label="the gate uses sigmoid(g) instead of silu(g) (a GLU, not SwiGLU)",
         keywords=["silu", "sigmoid", "swish"],
         patch=[("    a = g * s                                                   # silu(g)\n",
                 "    a = s\n")]),
    dict(label="dW_gate from dh * u (the silu derivative skipped)",
         keywords=["silu", "derivative", "dw_gate", "dg"],
         patch=[("dW_gate = dg.reshape(-1, F).T @ x2 ", "dW_gate = da.reshape(-1, F).T @ x2 ")]),
]

CORRECT = '''
import numpy as np


def _sig(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def swiglu_forward(x, W_gate, W_up, W_down):
    zg = np.einsum("...d,fd->...f", x, W_gate)
    zu = np.einsum("...d,fd->...f", x, W_up)
    sg = _sig(zg)
    hid = zg * sg * zu
    return np.einsum("...f,df->...d", hid, W_down), {"x": x, "w": (W_gate, W_up, W_down),
                                                     "zg": zg, "zu": zu, "sg": sg, "hid": hid}


def swiglu_backward(dy, cache):
    W_gate, W_up, W_down = cache["w"]
    x, zg, zu, sg, hid = cache["x"], cache["zg"], cache["zu"], cache["sg"], cache["hid"]
    lead = tuple(range(dy.ndim - 1))
    dW_down = np.tensordot(dy, hid, axes=(lead, lead))
    dhid = np.einsum("...d,df->...f", dy, W_down)
    dzu = dhid * zg * sg
    dzg = dhid * zu * sg * (1.0 + zg * (1.0 - sg))
    dW_gate = np.tensordot(dzg, x, axes=(lead, lead))
    dW_up = np.tensordot(dzu, x, axes=(lead, lead))
    dx = np.einsum("...f,fd->...d", dzg, W_gate) + np.einsum("...f,fd->...d", dzu, W_up)
    return dx, dW_gate, dW_up, dW_down
'''
