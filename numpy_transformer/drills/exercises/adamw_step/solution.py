"""One AdamW step (torch.optim.AdamW): decoupled weight decay, moments, bias corrections."""

import numpy as np


def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    """(param, grad, m, v) of one shape -> the updated (param, m, v), new arrays.

    The decay multiplies the parameter itself (decoupled: it never enters m and v, unlike Adam's
    L2 penalty, which adds weight_decay * param to the gradient). m and v start at 0, so after t
    updates they are biased towards 0 by the factors 1 - beta**t, which the corrections divide out;
    t counts this update (step + 1). eps goes outside the square root.
    """
    beta1, beta2 = betas
    t = step + 1                                        # this update's number: 1 for the first
    param = param * (1.0 - lr * weight_decay)           # decoupled weight decay
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    m_hat = m / (1.0 - beta1 ** t)
    v_hat = v / (1.0 - beta2 ** t)
    param = param - lr * m_hat / (np.sqrt(v_hat) + eps)
    return param, m, v
