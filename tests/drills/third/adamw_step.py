"""Third-set mistakes for adamw_step."""

MISTAKES = [
    dict(label="first moment's EMA weights swapped (beta1 on the gradient, 1 - beta1 on m)",
         keywords=["first moment", "beta1", "ema weights"],
         patch=[("m = beta1 * m + (1.0 - beta1) * grad", "m = (1.0 - beta1) * m + beta1 * grad")]),
    dict(label="bias correction (1 - beta1)^t instead of 1 - beta1^t",
         keywords=["bias correction", "bias-correction", "1 - beta"],
         patch=[("m_hat = m / (1.0 - beta1 ** t)", "m_hat = m / (1.0 - beta1) ** t")]),
    dict(label="update sign flipped (the step ascends the gradient)",
         keywords=["sign", "ascen"],
         patch=[("param = param - lr * m_hat", "param = param + lr * m_hat")]),
    dict(label="second moment accumulates the squared first moment instead of the squared gradient",
         keywords=["second moment", "squared gradient", "grad * grad"],
         patch=[("v = beta2 * v + (1.0 - beta2) * grad * grad", "v = beta2 * v + (1.0 - beta2) * m * m")]),
]

CORRECT = '''
import numpy as np


def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    b1, b2 = betas
    n = step + 1
    new_m = m + (1.0 - b1) * (grad - m)
    new_v = v + (1.0 - b2) * (np.square(grad) - v)
    shrunk = param - lr * weight_decay * param
    step_size = lr / (1.0 - b1 ** n)
    denom = np.sqrt(new_v / (1.0 - b2 ** n)) + eps
    return shrunk - step_size * new_m / denom, new_m, new_v
'''
