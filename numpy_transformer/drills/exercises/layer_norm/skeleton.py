"""Drill: LayerNorm over the last axis (as torch.nn.LayerNorm(D)), forward and backward.

Shape letters: N... any leading dimensions (e.g. B, S), D the normalised features.

    y = gamma * (x - mean) / sqrt(var + eps) + beta      (statistics over the last axis only)

Conventions (the grader checks them):
* the variance is the *biased* one (divide by D, as torch), and eps sits *inside* the square root;
* forward returns (y, cache); backward returns (dx, dgamma, dbeta), each with the shape of what it
  is the gradient of;
* float64 throughout; do not modify the inputs in place. Some cases have a tiny variance (eps
  matters).

Hints:
* Name the intermediates: mu, xc = x - mu, var, rstd = 1/sqrt(var + eps), xhat = xc * rstd.
* gamma and beta are broadcast over every leading position: their gradients sum over those axes.
* x_j reaches the loss three ways: through xhat_j directly, through mu and through var. The result
  fits in one line in terms of xhat, rstd and dxhat = dy * gamma.
"""

import numpy as np


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last axis.

    Parameters
    ----------
    x : ndarray, shape (N..., D)
    gamma : ndarray, shape (D,)   scale
    beta : ndarray, shape (D,)    shift
    eps : float

    Returns
    -------
    y : ndarray, shape (N..., D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def layer_norm_backward(dy, cache):
    """Gradients given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., D)
    cache : what layer_norm_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., D)
    dgamma : ndarray, shape (D,)
    dbeta : ndarray, shape (D,)
    """
    raise NotImplementedError
