"""Fresh unlisted mistakes for adamw_step."""

MISTAKES = [
    dict(label="no bias correction of the second moment (v_hat = v)",
         keywords=["bias correction", "second moment", "v_hat", "1 - beta2"],
         patch=[("v_hat = v / (1.0 - beta2 ** t)", "v_hat = v")]),
    dict(label="the second moment's update weighted with 1 - beta1",
         keywords=["beta1", "beta2", "second moment", "betas"],
         patch=[("v = beta2 * v + (1.0 - beta2) * grad * grad", "v = beta2 * v + (1.0 - beta1) * grad * grad")]),
    dict(label="bias correction multiplies by 1 - beta**t instead of dividing",
         keywords=["bias correction", "divide", "multipl"],
         patch=[("m_hat = m / (1.0 - beta1 ** t)", "m_hat = m * (1.0 - beta1 ** t)"),
                ("v_hat = v / (1.0 - beta2 ** t)", "v_hat = v * (1.0 - beta2 ** t)")]),
    dict(label="the bias-corrected moments stored as the new state (returns m_hat, v_hat)",
         keywords=["m_hat", "state", "bias-corrected", "corrected moment"],
         patch=[("    return param, m, v", "    return param, m_hat, v_hat")]),
    dict(label="no square root of v_hat in the denominator",
         keywords=["sqrt", "square root"],
         patch=[("param = param - lr * m_hat / (np.sqrt(v_hat) + eps)", "param = param - lr * m_hat / (v_hat + eps)")]),
    dict(label="weight decay applied after the Adam update (to the updated parameter)",
         keywords=["weight decay", "decay", "order"],
         patch=[("    param = param * (1.0 - lr * weight_decay)           # decoupled weight decay\n", ""),
                ("    param = param - lr * m_hat / (np.sqrt(v_hat) + eps)\n",
                 "    param = param - lr * m_hat / (np.sqrt(v_hat) + eps)\n    param = param * (1.0 - lr * weight_decay)\n")]),
]

CORRECT = '''
import numpy as np


def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    b1, b2 = betas
    n = step + 1
    new_m = b1 * m + (1 - b1) * grad
    new_v = b2 * v + (1 - b2) * np.square(grad)
    corr1 = 1 - b1 ** n
    corr2 = 1 - b2 ** n
    denom = np.sqrt(new_v / corr2) + eps
    decayed = param - lr * weight_decay * param
    return decayed - (lr / corr1) * new_m / denom, new_m, new_v
'''
