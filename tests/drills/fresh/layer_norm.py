"""Fresh unlisted mistakes for layer_norm."""

MISTAKES = [
    dict(label="statistics over the batch axis (axis 0) instead of the feature axis",
         keywords=["axis", "last", "feature"],
         patch=[("mu = x.mean(axis=-1, keepdims=True) ", "mu = x.mean(axis=0, keepdims=True) "),
                ("var = np.mean(xc * xc, axis=-1, keepdims=True) ", "var = np.mean(xc * xc, axis=0, keepdims=True) ")]),
    dict(label="dx misses the overall 1/sigma (rstd) factor",
         keywords=["rstd", "1/sigma", "std", "scale"],
         patch=[("    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)", "    dx = (dxhat - dxhat.mean(axis=-1, keepdims=True)")]),
    dict(label="dbeta summed over the first axis only (3-D inputs not reduced over every leading axis)",
         keywords=["sum", "leading", "batch", "axes"],
         patch=[("dbeta = np.sum(dy, axis=lead) ", "dbeta = np.sum(dy, axis=0) ")]),
    dict(label="the xhat projection term uses dy instead of dxhat (gamma forgotten there)",
         keywords=["gamma", "dxhat"],
         patch=[("- xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))", "- xhat * np.mean(dy * xhat, axis=-1, keepdims=True))")]),
    dict(label="affine applied in the wrong order: (xhat + beta) * gamma",
         keywords=["beta", "gamma", "affine", "order"],
         patch=[("y = xhat * gamma + beta ", "y = (xhat + beta) * gamma ")]),
]

CORRECT = '''
import numpy as np


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    centred = x - np.sum(x, axis=-1, keepdims=True) / d
    sigma = np.sqrt(np.sum(centred ** 2, axis=-1, keepdims=True) / d + eps)
    normed = centred / sigma
    return gamma * normed + beta, {"n": normed, "sigma": sigma, "g": gamma}


def layer_norm_backward(dy, cache):
    n, sigma, g = cache["n"], cache["sigma"], cache["g"]
    d = n.shape[-1]
    flat_dy = dy.reshape(-1, d)
    dgamma = np.einsum("ij,ij->j", flat_dy, n.reshape(-1, d))
    dbeta = flat_dy.sum(axis=0)
    dn = dy * g
    dx = (d * dn - dn.sum(-1, keepdims=True) - n * (dn * n).sum(-1, keepdims=True)) / (d * sigma)
    return dx, dgamma, dbeta
'''
