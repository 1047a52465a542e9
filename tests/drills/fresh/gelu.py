"""Fresh unlisted mistakes for gelu."""

MISTAKES = [
    dict(label="tanh form: the constant 2/pi used without its square root",
         keywords=["sqrt(2/pi)", "constant", "square root"],
         patch=[("        u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)", "        u = (2.0 / math.pi) * (x + 0.044715 * x ** 3)")]),
    dict(label="tanh form forward: 0.044715 x^2 instead of the cubic term",
         keywords=["cubic", "x^3", "x**3", "power"],
         patch=[("        u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)", "        u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 2)")]),
    dict(label="tanh backward: the 1/2 factor on the x (1 - t^2) du/dx term dropped",
         keywords=["factor", "1/2", "0.5", "half"],
         patch=[("slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t)", "slope = 0.5 * (1.0 + t) + x * (1.0 - t * t)")]),
    dict(label="exact backward: the normal CDF without its 1/2 ((1 + erf) instead of (1 + erf)/2)",
         keywords=["cdf", "1/2", "0.5", "half"],
         patch=[("        cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))\n        pdf",
                 "        cdf = 1.0 + _erf(x / math.sqrt(2.0))\n        pdf")]),
    dict(label="the backward ignores the approximate option (tests `is True`): always the exact slope",
         keywords=["tanh", "approximat", "exact", "option"],
         patch=[("    x, approximate = cache\n    if approximate == \"tanh\":", "    x, approximate = cache\n    if approximate is True:")]),
]

CORRECT = '''
import math

import numpy as np

SQ2PI = math.sqrt(2.0 / math.pi)
K = 0.044715


def _erf(z):
    return np.array([math.erf(float(t)) for t in np.ravel(z)]).reshape(np.shape(z))


def gelu_forward(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(approximate)
    if approximate == "none":
        y = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    else:
        y = 0.5 * x * (1.0 + np.tanh(SQ2PI * (x + K * x * x * x)))
    return y, {"x": x, "tanh": approximate == "tanh"}


def gelu_backward(dy, cache):
    x = cache["x"]
    if not cache["tanh"]:
        return dy * (0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi))
    inner = SQ2PI * (x + K * x ** 3)
    th = np.tanh(inner)
    sech2 = 1.0 - th ** 2
    return dy * 0.5 * (1.0 + th + x * sech2 * SQ2PI * (1.0 + 3.0 * K * x ** 2))
'''
