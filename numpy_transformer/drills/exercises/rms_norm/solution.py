"""RMSNorm over the last axis, forward and backward."""

import numpy as np


def rms_norm_forward(x, gamma, eps=1e-6):
    """x (N..., D), gamma (D,) -> (y, cache).

    ms = mean(x^2)  (no mean subtracted), xhat = x / sqrt(ms + eps), y = gamma * xhat.
    """
    ms = np.mean(x * x, axis=-1, keepdims=True)                 # (N..., 1) mean of squares
    rstd = 1.0 / np.sqrt(ms + eps)                              # (N..., 1) eps inside the sqrt
    xhat = x * rstd                                             # (N..., D)
    y = xhat * gamma                                            # (N..., D)
    return y, (xhat, rstd, gamma)


def rms_norm_backward(dy, cache):
    """dy (N..., D) -> (dx (N..., D), dgamma (D,)).

    * gamma is broadcast over every leading position, so its gradient sums over them:
      dgamma = sum(dy * xhat).
    * dxhat = dy * gamma. x_j reaches the loss through xhat_j directly and through rstd
      (d rstd/d x_j = -rstd^3 x_j / D = -rstd^2 xhat_j / D). Collecting the two paths:
          dx = rstd * (dxhat - xhat * mean(dxhat * xhat))
      (the mean term removes the component along xhat, the one direction the normalisation projects
      out; there is no -mean(dxhat) term as in LayerNorm, since no mean was subtracted).
    """
    xhat, rstd, gamma = cache
    lead = tuple(range(dy.ndim - 1))
    dgamma = np.sum(dy * xhat, axis=lead)                       # (D,)
    dxhat = dy * gamma                                          # (N..., D)
    dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))
    return dx, dgamma
