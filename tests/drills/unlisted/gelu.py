"""Unlisted mistakes for gelu."""

MISTAKES = [
    dict(label="exact backward forgets the x * pdf term of the product rule",
         keywords=["product rule", "pdf", "x * phi", "missing term"],
         patch=[("        slope = cdf + x * pdf\n", "        slope = cdf\n")]),
    dict(label="exact backward: pdf without the 1/sqrt(2 pi) normalisation",
         keywords=["sqrt(2", "pdf", "normal", "factor"],
         patch=[("pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)", "pdf = np.exp(-0.5 * x * x)")]),
    dict(label="exact forward: erf(x) instead of erf(x / sqrt(2))",
         keywords=["sqrt(2)", "erf", "cdf"],
         patch=[("y = x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))", "y = x * 0.5 * (1.0 + _erf(x))")]),
    dict(label="tanh backward: chain factor du/dx missing the 3 * 0.044715 x^2 term",
         keywords=["du/dx", "chain", "inner derivative", "0.044715"],
         patch=[("* c * (1.0 + 3 * 0.044715 * x * x)", "* c")]),
    dict(label="tanh backward: 1 - t instead of 1 - t^2",
         keywords=["tanh", "1 - t", "derivative", "t^2"],
         patch=[("0.5 * x * (1.0 - t * t) * c", "0.5 * x * (1.0 - t) * c")]),
    dict(label="the backward returns the slope, ignoring dy",
         keywords=["dy", "upstream"],
         patch=[("    return dy * slope\n", "    return slope + 0 * dy\n")]),
    dict(label="exact backward: pdf with the wrong sign (x * phi subtracted)",
         keywords=["sign", "product rule", "pdf"],
         patch=[("        slope = cdf + x * pdf\n", "        slope = cdf - x * pdf\n")]),
]

CORRECT = '''
import math

import numpy as np

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _phi_cdf(x):
    return 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x.ravel()]).reshape(x.shape))


def gelu_forward(x, approximate="none"):
    if approximate == "none":
        return x * _phi_cdf(x), ("none", x)
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * np.power(x, 3))
    return 0.5 * x * (1.0 + np.tanh(inner)), ("tanh", x)


def gelu_backward(dy, cache):
    mode, x = cache
    if mode == "none":
        density = np.exp(-x ** 2 / 2.0) / math.sqrt(2.0 * math.pi)
        return dy * (_phi_cdf(x) + x * density)
    th = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * np.power(x, 3)))
    dinner = _SQRT_2_OVER_PI * (1.0 + 0.134145 * x ** 2)
    return dy * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th ** 2) * dinner)
'''
