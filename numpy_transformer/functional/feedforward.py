"""SwiGLU, the gated feed-forward of Llama-style blocks: ``down(silu(gate(x)) * up(x))``, forward and
backward, built from :mod:`.linear` and :mod:`.activations` (Shazeer, "GLU Variants Improve
Transformer", 2020; Hugging Face's ``LlamaMLP``).

Shapes: x (..., D), w_gate and w_up (F, D), w_down (D, F); biases (F,), (F,), (D,).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .activations import SiluCache, silu_backward, silu_forward
from .linear import LinearCache, linear_backward, linear_forward

__all__ = ["SwigluCache", "swiglu_forward", "swiglu_backward"]


class SwigluCache(NamedTuple):
    gate: LinearCache             # x -> g = x W_gate^T + b_gate
    up: LinearCache               # x -> u = x W_up^T + b_up
    act: SiluCache                # g -> a = silu(g)
    a: np.ndarray                 # (..., F) the gated branch silu(g)
    u: np.ndarray                 # (..., F) the up branch
    down: LinearCache             # h = a * u -> out


def swiglu_forward(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None):
    """``out = (silu(x W_gate^T + b_gate) * (x W_up^T + b_up)) W_down^T + b_down``.

    Parameters
    ----------
    x : ndarray, shape (..., D)
    w_gate, w_up : ndarray, shape (F, D)
        The gate branch (through SiLU) and the linear up branch.
    w_down : ndarray, shape (D, F)
    b_gate, b_up : ndarray, shape (F,), optional
    b_down : ndarray, shape (D,), optional

    Returns
    -------
    out : ndarray, shape (..., D)
    cache : SwigluCache
    """
    g, gate = linear_forward(x, w_gate, b_gate)                  # (..., F)
    u, up = linear_forward(x, w_up, b_up)                        # (..., F)
    a, act = silu_forward(g)                                     # (..., F)
    out, down = linear_forward(a * u, w_down, b_down)            # (..., D)
    return out, SwigluCache(gate, up, act, a, u, down)


def swiglu_backward(dout, cache):
    """Backward of ``out = down(h)``, ``h = a * u``, ``a = silu(g)``, ``g = gate(x)``, ``u = up(x)``.

    * ``down`` is a linear layer: ``dh = dout W_down`` and ``dW_down = dout^T h`` (section Linear).
    * ``h = a * u`` is an elementwise product, so each factor's gradient is the other factor times
      ``dh`` (the product rule): ``da = dh * u`` and ``du = dh * a``.
    * ``a = silu(g)``: ``dg = da * silu'(g)``, ``silu'(g) = s + g s (1 - s)``, ``s = sigmoid(g)``.
    * x feeds both ``gate`` and ``up``: its gradient is the sum of the two linear backwards,
      ``dx = dg W_gate + du W_up``, and ``dW_gate = dg^T x``, ``dW_up = du^T x``.

    Returns
    -------
    dx, dw_gate, dw_up, dw_down, db_gate, db_up, db_down : ndarray (a bias gradient is None when the
    forward had no such bias)
    """
    a, u, act = cache.a, cache.u, cache.act                      # h = a * u, a = silu(g)
    dh, dw_down, db_down = linear_backward(dout, cache.down)     # (..., F), (D, F), (D,)
    dg = silu_backward(dh * u, act)                              # (..., F): da = dh * u, through silu
    du = dh * a                                                  # (..., F)
    dx_gate, dw_gate, db_gate = linear_backward(dg, cache.gate)  # (..., D), (F, D), (F,)
    dx_up, dw_up, db_up = linear_backward(du, cache.up)          # (..., D), (F, D), (F,)
    return dx_gate + dx_up, dw_gate, dw_up, dw_down, db_gate, db_up, db_down
