"""Third-set mistakes for rope."""

MISTAKES = [
    dict(label="frequency index from the odd numbers 2i + 1",
         keywords=["exponent", "frequency", "2i"],
         patch=[("w = base ** (-np.arange(0, dh, 2) / dh)", "w = base ** (-np.arange(1, dh, 2) / dh)")]),
    dict(label="cos and sin swapped in the forward rotation",
         keywords=["cos", "sin", "swapped"],
         patch=[("return _rotate(x, cos, sin, first, second)", "return _rotate(x, sin, cos, first, second)")]),
    dict(label="positions shifted by one (positions + 1)",
         keywords=["position", "off by one", "shift"],
         patch=[("theta = np.asarray(positions, dtype=np.float64)[:, None] * w", "theta = (np.asarray(positions, dtype=np.float64)[:, None] + 1) * w")]),
    dict(label="the base ignored (e^(-2i/Dh) instead of base^(-2i/Dh))",
         keywords=["base", "10000"],
         patch=[("w = base ** (-np.arange(0, dh, 2) / dh)", "w = np.exp(-np.arange(0, dh, 2) / dh)")]),
]

CORRECT = '''
import numpy as np


def _angles(positions, dh, base):
    inv = 1.0 / np.power(base, np.arange(dh // 2) * 2.0 / dh)
    return np.outer(np.asarray(positions, dtype=np.float64), inv)


def _apply(x, c, s, interleaved):
    h = x.shape[-1] // 2
    if interleaved:
        pairs = x.reshape(*x.shape[:-1], h, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return np.stack([a * c - b * s, a * s + b * c], axis=-1).reshape(x.shape)
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def rope_forward(x, positions, base=10000.0, interleaved=False):
    th = _angles(positions, x.shape[-1], base)
    return _apply(x, np.cos(th), np.sin(th), interleaved), (th, interleaved)


def rope_backward(dy, cache):
    th, interleaved = cache
    return _apply(dy, np.cos(-th), np.sin(-th), interleaved)
'''
