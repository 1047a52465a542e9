"""Unlisted mistakes for dropout."""

MISTAKES = [
    dict(label="kept elements not rescaled by 1/(1-p) in the forward",
         keywords=["1/(1-p)", "1/(1 - p)", "scale", "rescal"],
         patch=[("return x * keep * scale, (keep, scale)", "return x * keep, (keep, scale)")]),
    dict(label="the backward forgets the 1/(1-p) scale",
         keywords=["1/(1-p)", "1/(1 - p)", "scale", "rescal"],
         patch=[("return dy * keep * scale", "return dy * keep")]),
    dict(label="keep drawn as rng.random < p (keeps with probability p)",
         keywords=["keep", "probability", "< p", "inverted"],
         patch=[("keep = rng.random(x.shape) >= p ", "keep = rng.random(x.shape) < p ")]),
    dict(label="scale p/(1-p)... scaled by (1 - p) instead of dividing",
         keywords=["1/(1-p)", "1/(1 - p)", "scale", "(1 - p)"],
         patch=[("scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)", "scale = 1.0 - p")]),
    dict(label="the backward drops the mask (scale only)",
         keywords=["mask", "keep", "dropped"],
         patch=[("return dy * keep * scale", "return dy * scale")]),
    dict(label="evaluation mode still drops",
         keywords=["training", "eval", "identity"],
         patch=[("    if not training:\n        return x.copy(), None\n", "")]),
]

CORRECT = '''
import numpy as np


def dropout_forward(x, p, rng, training=True):
    if not training:
        return np.array(x, copy=True), None
    u = rng.random(x.shape)
    factor = np.where(u < p, 0.0, 1.0 / (1.0 - p) if p < 1.0 else 0.0)
    return x * factor, factor


def dropout_backward(dy, cache):
    if cache is None:
        return np.array(dy, copy=True)
    return dy * cache
'''
