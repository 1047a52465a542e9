"""Fresh unlisted mistakes for rms_norm."""

MISTAKES = [
    dict(label="dx misses the overall 1/rms (rstd) factor",
         keywords=["rstd", "1/rms", "scale"],
         patch=[("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))",
                 "dx = dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)")]),
    dict(label="the projection term uses dy instead of dxhat (gamma forgotten there)",
         keywords=["gamma", "dxhat"],
         patch=[("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))",
                 "dx = rstd * (dxhat - xhat * np.mean(dy * xhat, axis=-1, keepdims=True))")]),
    dict(label="the mean of squares over the batch axis (axis 0) instead of the features",
         keywords=["axis", "last", "feature"],
         patch=[("ms = np.mean(x * x, axis=-1, keepdims=True) ", "ms = np.mean(x * x, axis=0, keepdims=True) ")]),
    dict(label="dgamma summed over the first axis only (not every leading axis)",
         keywords=["sum", "leading", "batch", "axes"],
         patch=[("dgamma = np.sum(dy * xhat, axis=lead) ", "dgamma = np.sum(dy * xhat, axis=0) ")]),
    dict(label="the projection term added instead of subtracted",
         keywords=["sign", "minus", "projection"],
         patch=[("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))",
                 "dx = rstd * (dxhat + xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))")]),
]

CORRECT = '''
import numpy as np


def rms_norm_forward(x, gamma, eps=1e-6):
    inv = (np.einsum("...d,...d->...", x, x)[..., None] / x.shape[-1] + eps) ** -0.5
    return gamma * (x * inv), {"x": x, "inv": inv, "gamma": gamma}


def rms_norm_backward(dy, cache):
    x, inv, gamma = cache["x"], cache["inv"], cache["gamma"]
    d = x.shape[-1]
    g = dy * gamma
    dx = inv * g - x * inv ** 3 * np.sum(g * x, axis=-1, keepdims=True) / d
    dgamma = (dy * x * inv).reshape(-1, d).sum(axis=0)
    return dx, dgamma
'''
