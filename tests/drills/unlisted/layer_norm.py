"""Unlisted mistakes for layer_norm."""

MISTAKES = [
    dict(label="dx misses the -mean(dxhat) term",
         keywords=["mean(dxhat)", "missing term", "mean", "all-ones"],
         patch=[("dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)\n                 - xhat",
                 "dx = rstd * (dxhat\n                 - xhat")]),
    dict(label="dx misses the xhat * mean(dxhat * xhat) term",
         keywords=["xhat", "missing term", "variance", "rstd"],
         patch=[("                 - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))", "                 )")]),
    dict(label="unbiased variance (divide by D - 1)",
         keywords=["biased", "d - 1", "ddof", "variance"],
         patch=[("var = np.mean(xc * xc, axis=-1, keepdims=True) ", "var = np.sum(xc * xc, axis=-1, keepdims=True) / (x.shape[-1] - 1) ")]),
    dict(label="eps outside the square root",
         keywords=["eps", "sqrt"],
         patch=[("rstd = 1.0 / np.sqrt(var + eps)", "rstd = 1.0 / (np.sqrt(var) + eps)")]),
    dict(label="dgamma and dbeta swapped",
         keywords=["swap", "dgamma", "dbeta"],
         patch=[("    return dx, dgamma, dbeta\n", "    return dx, dbeta, dgamma\n")]),
    dict(label="dxhat uses dy without gamma",
         keywords=["gamma", "dxhat"],
         patch=[("dxhat = dy * gamma ", "dxhat = dy ")]),
    dict(label="dgamma uses dy * x instead of dy * xhat",
         keywords=["xhat", "dgamma", "normalised"],
         patch=[("    xhat, rstd, gamma = cache\n    lead", "    xhat, rstd, gamma = cache\n    xraw = xhat / rstd\n    lead"),
                ("dgamma = np.sum(dy * xhat, axis=lead)", "dgamma = np.sum(dy * xraw, axis=lead)")]),
]

CORRECT = '''
import numpy as np


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    centred = x - x.sum(axis=-1, keepdims=True) / d
    inv = (np.square(centred).sum(axis=-1, keepdims=True) / d + eps) ** -0.5
    normed = centred * inv
    return gamma * normed + beta, {"n": normed, "inv": inv, "g": gamma}


def layer_norm_backward(dy, cache):
    n, inv, g = cache["n"], cache["inv"], cache["g"]
    d = n.shape[-1]
    flat_dy = dy.reshape(-1, d)
    flat_n = n.reshape(-1, d)
    dbeta = flat_dy.sum(axis=0)
    dgamma = (flat_dy * flat_n).sum(axis=0)
    dn = dy * g
    a = dn.sum(axis=-1, keepdims=True)
    b = (dn * n).sum(axis=-1, keepdims=True)
    dx = inv / d * (d * dn - a - n * b)
    return dx, dgamma, dbeta
'''
