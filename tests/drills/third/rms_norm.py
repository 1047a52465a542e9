"""Third-set mistakes for rms_norm."""

MISTAKES = [
    dict(label="rstd multiplies only the first term of dx",
         keywords=["rstd", "1/rms", "parenthes"],
         patch=[("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))", "dx = rstd * dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)")]),
    dict(label="the projection term uses the sum instead of the mean (1/D missing)",
         keywords=["mean", "1/d", "sum"],
         patch=[("xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))", "xhat * np.sum(dxhat * xhat, axis=-1, keepdims=True))")]),
    dict(label="the mean of squares over every axis (one statistic for the whole tensor), not per row",
         keywords=["axis", "per row", "whole tensor"],
         patch=[("ms = np.mean(x * x, axis=-1, keepdims=True)", "ms = np.mean(x * x, keepdims=True)")]),
    dict(label="dgamma multiplied by gamma (sum(dy * xhat * gamma))",
         keywords=["dgamma", "gamma"],
         patch=[("dgamma = np.sum(dy * xhat, axis=lead)", "dgamma = np.sum(dy * xhat * gamma, axis=lead)")]),
]

CORRECT = '''
import numpy as np


def rms_norm_forward(x, gamma, eps=1e-6):
    rms = np.sqrt(np.square(x).mean(axis=-1, keepdims=True) + eps)
    return gamma * (x / rms), (x, rms, gamma)


def rms_norm_backward(dy, cache):
    x, rms, gamma = cache
    d = x.shape[-1]
    n = x / rms
    axes = tuple(range(dy.ndim - 1))
    g = dy * gamma
    dx = g / rms - x * (g * x).sum(-1, keepdims=True) / (d * rms ** 3)
    return dx, (dy * n).sum(axis=axes)
'''
