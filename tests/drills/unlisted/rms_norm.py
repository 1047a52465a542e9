"""Unlisted mistakes for rms_norm."""

MISTAKES = [
    dict(label="dx misses the xhat * mean(dxhat * xhat) term",
         keywords=["xhat", "missing term", "rstd", "mean"],
         patch=[("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))", "dx = rstd * dxhat")]),
    dict(label="a LayerNorm-style -mean(dxhat) term added",
         keywords=["mean(dxhat)", "layernorm", "mean"],
         patch=[("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))",
                 "dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))")]),
    dict(label="the mean subtracted in the forward (LayerNorm, not RMSNorm)",
         keywords=["mean", "layernorm", "subtract"],
         patch=[("ms = np.mean(x * x, axis=-1, keepdims=True) ", "x = x - x.mean(axis=-1, keepdims=True)\n    ms = np.mean(x * x, axis=-1, keepdims=True) ")]),
    dict(label="root of the sum of squares instead of the mean (missing 1/D)",
         keywords=["1/d", "mean", "sum", "sqrt(d)"],
         patch=[("ms = np.mean(x * x, axis=-1, keepdims=True) ", "ms = np.sum(x * x, axis=-1, keepdims=True) ")]),
    dict(label="eps outside the square root",
         keywords=["eps", "sqrt"],
         patch=[("rstd = 1.0 / np.sqrt(ms + eps)", "rstd = 1.0 / (np.sqrt(ms) + eps)")]),
    dict(label="dgamma uses the raw x instead of xhat",
         keywords=["xhat", "dgamma", "normalised"],
         patch=[("dgamma = np.sum(dy * xhat, axis=lead) ", "dgamma = np.sum(dy * xhat / rstd, axis=lead) ")]),
]

CORRECT = '''
import numpy as np


def rms_norm_forward(x, gamma, eps=1e-6):
    inv_rms = 1.0 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)
    return gamma * (x * inv_rms), (x, inv_rms, gamma)


def rms_norm_backward(dy, cache):
    x, inv_rms, gamma = cache
    d = x.shape[-1]
    normed = x * inv_rms
    dgamma = (dy * normed).reshape(-1, d).sum(axis=0)
    g = dy * gamma
    proj = (g * x).sum(axis=-1, keepdims=True)
    dx = inv_rms * g - x * inv_rms ** 3 * proj / d
    return dx, dgamma
'''
