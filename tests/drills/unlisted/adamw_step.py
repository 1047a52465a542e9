"""Unlisted mistakes for adamw_step."""

MISTAKES = [
    dict(label="weight decay added to the gradient (Adam's L2 penalty, not decoupled)",
         keywords=["decoupled", "l2", "weight decay", "weight_decay"],
         patch=[("    param = param * (1.0 - lr * weight_decay)           # decoupled weight decay\n", ""),
                ("    m = beta1 * m + (1.0 - beta1) * grad\n    v = beta2 * v + (1.0 - beta2) * grad * grad\n",
                 "    grad = grad + weight_decay * param\n    m = beta1 * m + (1.0 - beta1) * grad\n"
                 "    v = beta2 * v + (1.0 - beta2) * grad * grad\n")]),
    dict(label="bias correction uses step instead of step + 1",
         keywords=["step", "bias correction", "t = step", "off by one"],
         patch=[("    t = step + 1 ", "    t = step + 0 ")]),
    dict(label="eps inside the square root",
         keywords=["eps", "sqrt"],
         patch=[("(np.sqrt(v_hat) + eps)", "np.sqrt(v_hat + eps)")]),
    dict(label="second moment accumulates |grad| instead of grad squared",
         keywords=["square", "grad * grad", "second moment", "v"],
         patch=[("(1.0 - beta2) * grad * grad", "(1.0 - beta2) * np.abs(grad)")]),
    dict(label="no bias correction of the first moment",
         keywords=["bias correction", "m_hat", "1 - beta1", "first moment"],
         patch=[("m_hat = m / (1.0 - beta1 ** t)", "m_hat = m")]),
    dict(label="weight decay not multiplied by lr",
         keywords=["lr", "weight decay", "weight_decay", "decay"],
         patch=[("param * (1.0 - lr * weight_decay)", "param * (1.0 - weight_decay)")]),
    dict(label="betas swapped between the two moments",
         keywords=["beta", "swapped", "betas"],
         patch=[("    beta1, beta2 = betas\n", "    beta2, beta1 = betas\n")]),
]

CORRECT = '''
import numpy as np


def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    b1, b2 = betas
    n = step + 1
    m_new = m * b1 + grad * (1 - b1)
    v_new = v * b2 + np.square(grad) * (1 - b2)
    denom = np.sqrt(v_new / (1 - b2 ** n)) + eps
    update = (m_new / (1 - b1 ** n)) / denom
    p_new = param - lr * weight_decay * param - lr * update
    return p_new, m_new, v_new
'''
