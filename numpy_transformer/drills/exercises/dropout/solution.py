"""Inverted dropout, forward and backward."""


def dropout_forward(x, p, rng, training=True):
    """x (any shape) -> (y, cache), y = x * keep / (1 - p), keep = rng.random(x.shape) >= p.

    Scaling the kept elements by 1 / (1 - p) during training keeps E[y] = x, so evaluation needs no
    rescaling: there dropout is the identity (and draws nothing).
    """
    if not training:
        return x.copy(), None
    keep = rng.random(x.shape) >= p                 # (x's shape) bool: P(keep) = 1 - p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)    # p = 1 drops all: no 1 / 0
    return x * keep * scale, (keep, scale)


def dropout_backward(dy, cache):
    """dy -> dx.

    y = x * c with the constant c = keep / (1 - p) drawn in the forward, so dx = dy * c: the SAME
    mask (never a new draw) and the same scale.
    """
    if cache is None:                               # training=False: the identity
        return dy.copy()
    keep, scale = cache
    return dy * keep * scale
