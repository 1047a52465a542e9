"""Fresh unlisted mistakes for rope."""

MISTAKES = [
    dict(label="theta = position / frequency (divides instead of multiplying)",
         keywords=["frequenc", "inverse", "divide", "theta"],
         patch=[("theta = np.asarray(positions, dtype=np.float64)[:, None] * w ", "theta = np.asarray(positions, dtype=np.float64)[:, None] / w ")]),
    dict(label="frequency exponent with the wrong sign (base ** (+2i/Dh))",
         keywords=["exponent", "frequenc", "sign", "negative"],
         patch=[("w = base ** (-np.arange(0, dh, 2) / dh) ", "w = base ** (np.arange(0, dh, 2) / dh) ")]),
    dict(label="the backward negates the cosine instead of the sine (dx comes out negated)",
         keywords=["sign", "transpose", "-theta", "cos"],
         patch=[("return _rotate(dy, cos, -sin, first, second)", "return _rotate(dy, -cos, sin, first, second)")]),
    dict(label="the rotation's second row mixes the factors: b sin + a cos",
         keywords=["rotation", "sin", "cos", "matrix"],
         patch=[("out[..., second] = a * sin + b * cos", "out[..., second] = b * sin + a * cos")]),
]

CORRECT = '''
import numpy as np


def _halves(width, interleaved):
    if interleaved:
        return np.arange(0, width, 2), np.arange(1, width, 2)
    return np.arange(width // 2), np.arange(width // 2, width)


def _turn(t, c, s, i0, i1):
    res = t.copy()
    x0, x1 = t[..., i0], t[..., i1]
    res[..., i0] = c * x0 - s * x1
    res[..., i1] = s * x0 + c * x1
    return res


def rope_forward(x, positions, base=10000.0, interleaved=False):
    width = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(width // 2) * 2.0 / width)
    ang = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    i0, i1 = _halves(width, interleaved)
    c, s = np.cos(ang), np.sin(ang)
    return _turn(x, c, s, i0, i1), {"c": c, "s": s, "i0": i0, "i1": i1}


def rope_backward(dy, cache):
    return _turn(dy, cache["c"], -cache["s"], cache["i0"], cache["i1"])
'''
