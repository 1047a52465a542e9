"""Drill: the SwiGLU feed-forward of Llama-style blocks (Hugging Face's LlamaMLP), forward and
backward.

    g = x @ W_gate.T      u = x @ W_up.T      (N..., F)
    h = silu(g) * u                           (N..., F),  silu(g) = g * sigmoid(g)
    y = h @ W_down.T                          (N..., D)

Shape letters: N... any leading dimensions (e.g. B, S), D model width, F hidden width.

Conventions (the grader checks them):
* weights have torch.nn.Linear's layout (out, in): W_gate and W_up (F, D), W_down (D, F); no biases.
* the gate branch (W_gate) goes through SiLU; the up branch (W_up) does not.
* forward returns (y, cache); backward returns (dx, dW_gate, dW_up, dW_down), each shaped like
  what it is the gradient of. float64 throughout; do not modify the inputs in place.

Hints:
* Go backwards one node at a time: the down projection, the product h = a * u, SiLU, the two
  projections.
* The gradient of a product reaching each factor is dh times the *other* factor.
* x feeds two branches: its gradient is the sum of both branches' contributions.
* silu'(g) = s + g * s * (1 - s) with s = sigmoid(g); keep sigmoid finite for large |g|.
"""

import numpy as np


def swiglu_forward(x, W_gate, W_up, W_down):
    """y = (silu(x W_gate^T) * (x W_up^T)) W_down^T.

    Parameters
    ----------
    x : ndarray, shape (N..., D)
    W_gate : ndarray, shape (F, D)
    W_up : ndarray, shape (F, D)
    W_down : ndarray, shape (D, F)

    Returns
    -------
    y : ndarray, shape (N..., D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def swiglu_backward(dy, cache):
    """Gradients given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., D)
    cache : what swiglu_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., D)
    dW_gate : ndarray, shape (F, D)
    dW_up : ndarray, shape (F, D)
    dW_down : ndarray, shape (D, F)
    """
    raise NotImplementedError
