"""Fresh unlisted mistakes for dropout."""

MISTAKES = [
    dict(label="the backward draws a new mask instead of reusing the forward's",
         keywords=["same mask", "new mask", "redraw", "mask"],
         patch=[("return x * keep * scale, (keep, scale)", "return x * keep * scale, (rng, p, scale)"),
                ("    keep, scale = cache\n", "    rng, p, scale = cache\n    keep = rng.random(dy.shape) >= p\n")]),
    dict(label="evaluation mode scales by 1 - p instead of being the identity",
         keywords=["eval", "identity", "training"],
         patch=[("        return x.copy(), None", "        return x * (1.0 - p), None")]),
    dict(label="the backward divides by the scale instead of multiplying",
         keywords=["scale", "1/(1-p)", "1 - p"],
         patch=[("    return dy * keep * scale\n", "    return dy * keep / scale if scale else dy * 0.0\n")]),
    dict(label="one mask over the last axis broadcast to every row (not one draw per element)",
         keywords=["shape", "per element", "broadcast", "same for every"],
         patch=[("keep = rng.random(x.shape) >= p ", "keep = rng.random(x.shape[-1:]) >= p ")]),
    dict(label="the training flag inverted (drops in eval, identity in training)",
         keywords=["training", "eval", "invert"],
         patch=[("    if not training:\n        return x.copy(), None", "    if training:\n        return x.copy(), None")]),
]

CORRECT = '''
import numpy as np


def dropout_forward(x, p, rng, training=True):
    if training is False:
        return np.array(x, copy=True), {"mult": None}
    u = rng.random(x.shape)
    if p >= 1.0:
        mult = np.zeros(x.shape)
    else:
        mult = np.where(u < p, 0.0, 1.0 / (1.0 - p))
    return x * mult, {"mult": mult}


def dropout_backward(dy, cache):
    mult = cache["mult"]
    if mult is None:
        return np.array(dy, copy=True)
    return dy * mult
'''
