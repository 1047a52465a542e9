"""Third-set mistakes for silu."""

MISTAKES = [
    dict(label="stable sigmoid with exp(-x) instead of exp(-|x|): wrong for negative x",
         keywords=["sigmoid", "negative", "|x|", "abs"],
         patch=[("    e = np.exp(-np.abs(x))\n", "    e = np.exp(-x)\n")]),
    dict(label="product rule: the x factor on s (1 - s) dropped",
         keywords=["x factor", "product rule", "x * s"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * (s + s * (1.0 - s))")]),
    dict(label="sigmoid of -x used (y = x (1 - s)): the sign of the exponent flipped",
         keywords=["sign", "sigmoid(-x)", "exponent"],
         patch=[("return x * s, (x, s)", "return x * (1.0 - s), (x, 1.0 - s)")]),
    dict(label="dy multiplies only the first term of the derivative (missing parentheses)",
         keywords=["parenthes", "upstream", "dy multiplies"],
         patch=[("return dy * (s + x * s * (1.0 - s))", "return dy * s + x * s * (1.0 - s)")]),
]

CORRECT = '''
import numpy as np


def silu_forward(x):
    sig = np.exp(-np.logaddexp(0.0, -x))
    return x * sig, (x, sig)


def silu_backward(dy, cache):
    x, sig = cache
    return dy * sig * (1.0 + x * (1.0 - sig))
'''
