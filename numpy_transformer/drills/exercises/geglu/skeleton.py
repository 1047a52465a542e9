"""Drill: the GeGLU feed-forward (Shazeer 2020; Hugging Face's GELU-gated MLP, as in Gemma and
T5 v1.1), forward and backward.

    g = x @ W_gate.T      u = x @ W_up.T      (N..., F)
    h = gelu(g) * u                           (N..., F),  gelu(g) = g * Phi(g)  (exact, erf form)
    y = h @ W_down.T                          (N..., D)

Shape letters: N... any leading dimensions (e.g. B, S), D model width, F hidden width.

Conventions (the grader checks them):
* weights have torch.nn.Linear's layout (out, in): W_gate and W_up (F, D), W_down (D, F); no biases.
* the gate branch (W_gate) goes through the exact GELU, torch.nn.functional.gelu's default
  (approximate="none"); the up branch (W_up) does not.
* forward returns (y, cache); backward returns (dx, dW_gate, dW_up, dW_down), each shaped like
  what it is the gradient of. float64 throughout; do not modify the inputs in place.

Hints:
* Go backwards one node at a time: the down projection, the product h = a * u, GELU, the two
  projections.
* The gradient of a product reaching each factor is dh times the *other* factor.
* x feeds two branches: its gradient is the sum of both branches' contributions.
* gelu(g) = g * Phi(g) is itself a product: gelu'(g) = Phi(g) + g * phi(g), with Phi the normal CDF
  (0.5 * (1 + erf(g / sqrt(2)))) and phi its density exp(-g^2 / 2) / sqrt(2 pi). NumPy has no erf:
  math.erf elementwise (np.vectorize) is fine here.
"""

import numpy as np


def geglu_forward(x, W_gate, W_up, W_down):
    """y = (gelu(x W_gate^T) * (x W_up^T)) W_down^T.

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


def geglu_backward(dy, cache):
    """Gradients given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., D)
    cache : what geglu_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., D)
    dW_gate : ndarray, shape (F, D)
    dW_up : ndarray, shape (F, D)
    dW_down : ndarray, shape (D, F)
    """
    raise NotImplementedError
