"""Drill: RMSNorm over the last axis (as torch.nn.RMSNorm(D, eps=1e-6)), forward and backward.

eps=1e-6 is Llama's setting and what the grader passes; torch's own default, eps=None, would use
torch.finfo(x.dtype).eps.

Shape letters: N... any leading dimensions (e.g. B, S), D the normalised features.

    y = gamma * x / sqrt(mean(x**2) + eps)      (the mean over the last axis only)

Conventions (the grader checks them):
* no mean is subtracted (that is LayerNorm): the statistic is the mean of the *squares*, and eps
  sits *inside* the square root; there is no beta;
* forward returns (y, cache); backward returns (dx, dgamma), each with the shape of what it is the
  gradient of;
* float64 throughout; do not modify the inputs in place. Some cases have D = 1 or tiny values (eps
  matters).

Hints:
* Name the intermediates: ms = mean(x**2), rstd = 1/sqrt(ms + eps), xhat = x * rstd.
* gamma is broadcast over every leading position: its gradient sums over those axes.
* x_j reaches the loss two ways: through xhat_j directly and through ms. The result fits in one line
  in terms of xhat, rstd and dxhat = dy * gamma.
"""

import numpy as np


def rms_norm_forward(x, gamma, eps=1e-6):
    """RMSNorm over the last axis.

    Parameters
    ----------
    x : ndarray, shape (N..., D)
    gamma : ndarray, shape (D,)   scale
    eps : float

    Returns
    -------
    y : ndarray, shape (N..., D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def rms_norm_backward(dy, cache):
    """Gradients given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., D)
    cache : what rms_norm_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., D)
    dgamma : ndarray, shape (D,)
    """
    raise NotImplementedError
