"""Drill: a whole Transformer encoder layer, forward and backward (the final boss).

Shape letters: B batch, S sequence length, D model width, H heads, Dh = D / H, F feed-forward width.

    SA(z) = multi-head self-attention of z (no biases, scale 1/sqrt(Dh), mask as below)
    FF(z) = relu(z W1^T + b1) W2^T + b2
    LN1, LN2 = LayerNorm over D (biased variance, eps = 1e-5 inside the sqrt)
               with gamma1/beta1, gamma2/beta2

    norm_first=False (post-LN, torch's default):   h = LN1(x + SA(x));    y = LN2(h + FF(h))
    norm_first=True  (pre-LN):                     h = x + SA(LN1(x));    y = h + FF(LN2(h))

params (a dict; weights in torch's layout (Dout, Din)):
    "Wq", "Wk", "Wv", "Wo": (D, D)     "W1": (F, D)  "b1": (F,)    "W2": (D, F)  "b2": (D,)
    "gamma1", "beta1", "gamma2", "beta2": (D,)

Conventions (the grader checks them):
* mask: bool (S, S), True = may NOT attend, or None. A row with every key masked gives zeros.
* forward returns (out, cache); backward returns (dx, grads) with grads a dict with the same 12 keys
  as params, each shaped like its parameter. No dropout. Float64; do not modify the inputs in place.

Hints:
* Build it from small forward/backward pairs (layer norm, attention, linear, relu), each returning
  (out, cache): the other drills are exactly these pieces.
* A residual y = x + f(x) sends the gradient to x twice: directly and through f.
* Walk the forward in reverse; check every gradient's shape against its forward value.
"""

import numpy as np


def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
    """One encoder layer.

    Parameters
    ----------
    x : ndarray, shape (B, S, D)
    params : dict of ndarrays (see the module docstring)
    num_heads : int, H (divides D)
    mask : ndarray of bool, shape (S, S), True = may not attend; or None
    norm_first : bool, pre-LN when True, post-LN when False

    Returns
    -------
    out : ndarray, shape (B, S, D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def encoder_layer_backward(dout, cache):
    """Gradients given dout = dL/dout.

    Parameters
    ----------
    dout : ndarray, shape (B, S, D)
    cache : what encoder_layer_forward returned

    Returns
    -------
    dx : ndarray, shape (B, S, D)
    grads : dict with the keys of params, each ndarray shaped like its parameter
    """
    raise NotImplementedError
