"""Third-set mistakes for gelu."""

MISTAKES = [
    dict(label="tanh backward: the sqrt(2/pi) of du/dx dropped",
         keywords=["chain", "sqrt(2/pi)", "du/dx"],
         patch=[("(1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)", "(1.0 - t * t) * (1.0 + 3 * 0.044715 * x * x)")]),
    dict(label="tanh backward: the derivative of x^3 missing its 3 (power rule)",
         keywords=["power rule", "3x^2", "3 * 0.044715", "cubic"],
         patch=[("(1.0 + 3 * 0.044715 * x * x)", "(1.0 + 0.044715 * x * x)")]),
    dict(label="exact forward: Phi written as erf(x / sqrt 2) (the (1 + .)/2 missing)",
         keywords=["cdf", "(1 + erf", "normal cdf"],
         patch=[("y = x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))", "y = x * _erf(x / math.sqrt(2.0))")]),
    dict(label="tanh forward: the x factor dropped (y = (1 + tanh u)/2)",
         keywords=["x factor", "factor x", "times x"],
         patch=[("y = 0.5 * x * (1.0 + np.tanh(u))", "y = 0.5 * (1.0 + np.tanh(u))")]),
]

CORRECT = '''
import math

import numpy as np

_A = 0.044715
_C = math.sqrt(2.0 / math.pi)


def _cdf(x):
    return np.vectorize(lambda t: 0.5 * math.erfc(-t / math.sqrt(2.0)), otypes=[float])(x)


def gelu_forward(x, approximate="none"):
    if approximate == "tanh":
        return x * 0.5 * (1.0 + np.tanh(_C * (x + _A * np.power(x, 3)))), ("tanh", x)
    return x * _cdf(x), ("none", x)


def gelu_backward(dy, cache):
    mode, x = cache
    if mode == "tanh":
        th = np.tanh(_C * (x + _A * np.power(x, 3)))
        return dy * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th ** 2) * _C * (1.0 + 3.0 * _A * x ** 2))
    return dy * (_cdf(x) + x * np.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi))
'''
