"""LayerNorm over the last axis, forward and backward."""

import numpy as np


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    """x (N..., D), gamma (D,), beta (D,) -> (y, cache).

    mu = mean(x), var = mean((x - mu)^2)  (biased: divide by D), xhat = (x - mu) / sqrt(var + eps),
    y = gamma * xhat + beta.
    """
    mu = x.mean(axis=-1, keepdims=True)                         # (N..., 1)
    xc = x - mu                                                 # (N..., D)
    var = np.mean(xc * xc, axis=-1, keepdims=True)              # (N..., 1) biased
    rstd = 1.0 / np.sqrt(var + eps)                             # (N..., 1) eps inside the sqrt
    xhat = xc * rstd                                            # (N..., D)
    y = xhat * gamma + beta                                     # (N..., D)
    return y, (xhat, rstd, gamma)


def layer_norm_backward(dy, cache):
    """dy (N..., D) -> (dx (N..., D), dgamma (D,), dbeta (D,)).

    * gamma and beta are broadcast over every leading position, so their gradients sum over them:
      dbeta = sum(dy), dgamma = sum(dy * xhat).
    * dxhat = dy * gamma. x_j reaches the loss through xhat_j directly, through mu
      (d mu/d x_j = 1/D) and through rstd (d rstd/d x_j = -rstd^3 (x_j - mu) / D). Collecting the
      three paths:
          dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
      (the two means remove the components along the all-ones direction and along xhat: exactly
      the directions the normalisation projects out).
    """
    xhat, rstd, gamma = cache
    lead = tuple(range(dy.ndim - 1))
    dgamma = np.sum(dy * xhat, axis=lead)                       # (D,)
    dbeta = np.sum(dy, axis=lead)                               # (D,)
    dxhat = dy * gamma                                          # (N..., D)
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))
    return dx, dgamma, dbeta
