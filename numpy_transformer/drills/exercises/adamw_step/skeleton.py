"""Drill: one step of AdamW (as torch.optim.AdamW, amsgrad=False), for one parameter array.

AdamW is Adam with DECOUPLED weight decay (Loshchilov & Hutter): the decay shrinks the parameter
directly instead of being added to the gradient. With t the number of this update (1 for the first):

    param <- param * (1 - lr * weight_decay)
    m     <- beta1 * m + (1 - beta1) * grad                  (the first moment, torch's exp_avg)
    v     <- beta2 * v + (1 - beta2) * grad**2               (the second moment, exp_avg_sq)
    m_hat = m / (1 - beta1**t),   v_hat = v / (1 - beta2**t)  (bias corrections)
    param <- param - lr * m_hat / (sqrt(v_hat) + eps)

Conventions (the grader checks them):
* step is the number of updates taken BEFORE this one (torch's state['step'] before the call: 0 for
  the first update, when m and v are zeros);
* return NEW arrays (param, m, v): do not modify the inputs in place (torch does, in its state; the
  grader passes you arrays it checks afterwards);
* some cases have tiny gradients (1e-6), where the place of eps matters; float64 throughout.

Hints:
* Write it as the five lines above, in that order.
"""

import numpy as np


def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    """One AdamW update.

    Parameters
    ----------
    param, grad, m, v : ndarray, one shape (any)
    step : int, updates taken before this one (>= 0)
    lr : float
    betas : (float, float), (beta1, beta2)
    eps : float
    weight_decay : float

    Returns
    -------
    param : ndarray, the updated parameter
    m : ndarray, the updated first moment
    v : ndarray, the updated second moment
    """
    raise NotImplementedError
