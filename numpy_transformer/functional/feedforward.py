"""The gated feed-forwards of today's blocks, ``down(act(gate(x)) * up(x))``, forward and backward,
built from :mod:`.linear` and :mod:`.activations` (Shazeer, "GLU Variants Improve Transformer", 2020):
:func:`gated_forward` / :func:`gated_backward` for any activation, and each variant a named pair on top,
SwiGLU (``act = silu``, Hugging Face's ``LlamaMLP``) and GeGLU (``act = gelu``, the GELU-gated MLP of
Gemma and T5 v1.1).

Shapes: x (..., D), w_gate and w_up (F, D), w_down (D, F); biases (F,), (F,), (D,).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .activations import gelu_backward, gelu_forward, silu_backward, silu_forward
from .linear import LinearCache, linear_backward, linear_forward

__all__ = ["GatedCache", "SwigluCache", "gated_forward", "gated_backward", "swiglu_forward", "swiglu_backward",
           "geglu_forward", "geglu_backward"]


class GatedCache(NamedTuple):
    gate: LinearCache             # x -> g = x W_gate^T + b_gate
    up: LinearCache               # x -> u = x W_up^T + b_up
    act_backward: Callable        # the activation's backward, (da, act) -> dg
    act: NamedTuple               # its cache, g -> a = act(g)
    a: np.ndarray                 # (..., F) the gated branch act(g)
    u: np.ndarray                 # (..., F) the up branch
    down: LinearCache             # h = a * u -> out


#: SwiGLU's cache is the gated one (a declared alias, not a copy)
SwigluCache = GatedCache


def gated_forward(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, *, act_forward, act_backward):
    """``out = (act(x W_gate^T + b_gate) * (x W_up^T + b_up)) W_down^T + b_down``.

    Parameters
    ----------
    x : ndarray, shape (..., D)
    w_gate, w_up : ndarray, shape (F, D)
        The gate branch (through the activation) and the linear up branch.
    w_down : ndarray, shape (D, F)
    b_gate, b_up : ndarray, shape (F,), optional
    b_down : ndarray, shape (D,), optional
    act_forward, act_backward : callable
        The gate's activation pair, ``act_forward(g) -> (a, act)`` and ``act_backward(da, act) -> dg``
        (``F.silu_forward``/``F.silu_backward`` for SwiGLU).

    Returns
    -------
    out : ndarray, shape (..., D)
    cache : GatedCache
    """
    g, gate = linear_forward(x, w_gate, b_gate)                  # (..., F)
    u, up = linear_forward(x, w_up, b_up)                        # (..., F)
    a, act = act_forward(g)                                      # (..., F)
    out, down = linear_forward(a * u, w_down, b_down)            # (..., D)
    return out, GatedCache(gate, up, act_backward, act, a, u, down)


def gated_backward(dout, cache):
    """Backward of ``out = down(h)``, ``h = a * u``, ``a = act(g)``, ``g = gate(x)``, ``u = up(x)``.

    * ``down`` is a linear layer: ``dh = dout W_down`` and ``dW_down = dout^T h`` (section Linear).
    * ``h = a * u`` is an elementwise product, so each factor's gradient is the other factor times
      ``dh`` (the product rule): ``da = dh * u`` and ``du = dh * a``.
    * ``a = act(g)``: ``dg = da * act'(g)``, the activation's own backward (SwiGLU's
      ``silu'(g) = s + g s (1 - s)``, ``s = sigmoid(g)``).
    * x feeds both ``gate`` and ``up``: its gradient is the sum of the two linear backwards,
      ``dx = dg W_gate + du W_up``, and ``dW_gate = dg^T x``, ``dW_up = du^T x``.

    Returns
    -------
    dx, dw_gate, dw_up, dw_down, db_gate, db_up, db_down : ndarray (a bias gradient is None when the
    forward had no such bias)
    """
    dh, dw_down, db_down = linear_backward(dout, cache.down)     # (..., F), (D, F), (D,)
    dg = cache.act_backward(dh * cache.u, cache.act)             # (..., F): da = dh * u, through act
    du = dh * cache.a                                            # (..., F)
    dx_gate, dw_gate, db_gate = linear_backward(dg, cache.gate)  # (..., D), (F, D), (F,)
    dx_up, dw_up, db_up = linear_backward(du, cache.up)          # (..., D), (F, D), (F,)
    return dx_gate + dx_up, dw_gate, dw_up, dw_down, db_gate, db_up, db_down


def swiglu_forward(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None):
    """SwiGLU, ``out = (silu(x W_gate^T + b_gate) * (x W_up^T + b_up)) W_down^T + b_down`` (Llama's):
    :func:`gated_forward` with SiLU. Shapes and returns as there."""
    return gated_forward(x, w_gate, w_up, w_down, b_gate, b_up, b_down,
                         act_forward=silu_forward, act_backward=silu_backward)


def swiglu_backward(dout, cache):
    """SwiGLU's backward: :func:`gated_backward`, whose ``dg = da * silu'(g)`` with
    ``silu'(g) = s + g s (1 - s)``, ``s = sigmoid(g)`` (section SwiGLU of docs/derivations.md).

    Returns
    -------
    dx, dw_gate, dw_up, dw_down, db_gate, db_up, db_down : ndarray (None for a missing bias)
    """
    return gated_backward(dout, cache)


def geglu_forward(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, approximate="none"):
    """GeGLU, ``out = (gelu(x W_gate^T + b_gate) * (x W_up^T + b_up)) W_down^T + b_down``:
    :func:`gated_forward` with GELU (``approximate`` as :func:`gelu_forward`'s: ``"none"``, the exact
    erf form of Shazeer's paper, or ``"tanh"``, Gemma's ``gelu_pytorch_tanh``). Shapes and returns as
    there."""
    def act_forward(g):
        return gelu_forward(g, approximate)
    return gated_forward(x, w_gate, w_up, w_down, b_gate, b_up, b_down,
                         act_forward=act_forward, act_backward=gelu_backward)


def geglu_backward(dout, cache):
    """GeGLU's backward: :func:`gated_backward` (the product rule, x feeding both branches), whose
    ``dg = da * gelu'(g)``: exact, ``gelu'(g) = Phi(g) + g phi(g)`` (the normal CDF and PDF); with
    ``approximate="tanh"`` the derivative of the tanh form (section GELU of docs/derivations.md).

    Returns
    -------
    dx, dw_gate, dw_up, dw_down, db_gate, db_up, db_down : ndarray (None for a missing bias)
    """
    return gated_backward(dout, cache)
