"""Unlisted mistakes for rope."""

MISTAKES = [
    dict(label="the backward rotates by +theta (forward again) instead of -theta",
         keywords=["-theta", "transpose", "inverse", "sine"],
         patch=[("    return _rotate(dy, cos, -sin, first, second)\n", "    return _rotate(dy, cos, sin, first, second)\n")]),
    dict(label="pair layouts swapped (interleaved vs rotate-half)",
         keywords=["interleav", "layout", "pair", "half"],
         patch=[("    if interleaved:\n", "    if not interleaved:\n")]),
    dict(label="frequency exponent -i/Dh instead of -2i/Dh",
         keywords=["2i", "frequenc", "exponent"],
         patch=[("w = base ** (-np.arange(0, dh, 2) / dh)", "w = base ** (-np.arange(0, dh // 2) / dh)")]),
    dict(label="rotation sign flipped in the forward (a sin - b cos convention)",
         keywords=["sign", "rotation", "direction", "-theta"],
         patch=[("    return _rotate(x, cos, sin, first, second), (cos, sin, first, second)",
                 "    return _rotate(x, cos, -sin, first, second), (cos, -sin, first, second)")]),
    dict(label="positions ignored: theta uses 0..S-1 always",
         keywords=["position", "offset"],
         patch=[("theta = np.asarray(positions, dtype=np.float64)[:, None] * w",
                 "theta = np.arange(len(positions), dtype=np.float64)[:, None] * w")]),
    dict(label="the backward drops the sine (cos only)",
         keywords=["sin", "rotation", "missing term"],
         patch=[("    return _rotate(dy, cos, -sin, first, second)\n", "    return _rotate(dy, cos, 0 * sin, first, second)\n")]),
]

CORRECT = '''
import numpy as np


def _angles(positions, dh, base):
    inv = 1.0 / (base ** (np.arange(dh // 2) * 2.0 / dh))
    return np.outer(np.asarray(positions, dtype=np.float64), inv)


def _apply(x, ang, interleaved, sign):
    c, s = np.cos(ang), sign * np.sin(ang)
    if interleaved:
        x1, x2 = x[..., ::2], x[..., 1::2]
        y = np.stack([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
        return y.reshape(x.shape)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def rope_forward(x, positions, base=10000.0, interleaved=False):
    ang = _angles(positions, x.shape[-1], base)
    return _apply(x, ang, interleaved, 1.0), (ang, interleaved)


def rope_backward(dy, cache):
    ang, interleaved = cache
    return _apply(dy, ang, interleaved, -1.0)
'''
