"""Third-set mistakes for layer_norm."""

MISTAKES = [
    dict(label="normalised by the variance instead of the standard deviation (no square root)",
         keywords=["square root", "standard deviation", "sqrt"],
         patch=[("rstd = 1.0 / np.sqrt(var + eps)", "rstd = 1.0 / (var + eps)")]),
    dict(label="rstd multiplies only the first term of dx",
         keywords=["rstd", "1/sigma", "parenthes"],
         patch=[("dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)", "dx = (rstd * dxhat - dxhat.mean(axis=-1, keepdims=True)")]),
    dict(label="dbeta multiplied by gamma (sum(dy * gamma))",
         keywords=["dbeta", "beta"],
         patch=[("dbeta = np.sum(dy, axis=lead)", "dbeta = np.sum(dy * gamma, axis=lead)")]),
    dict(label="the xhat projection term added instead of subtracted",
         keywords=["sign", "added", "subtract"],
         patch=[("- xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))", "+ xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))")]),
]

CORRECT = '''
import numpy as np


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    mean = x.sum(-1, keepdims=True) / d
    dev = x - mean
    sigma = np.sqrt((dev ** 2).sum(-1, keepdims=True) / d + eps)
    norm = dev / sigma
    return gamma * norm + beta, {"norm": norm, "sigma": sigma, "gamma": gamma}


def layer_norm_backward(dy, cache):
    norm, sigma, gamma = cache["norm"], cache["sigma"], cache["gamma"]
    d = norm.shape[-1]
    flat_dy = dy.reshape(-1, d)
    dgamma = (flat_dy * norm.reshape(-1, d)).sum(0)
    dbeta = flat_dy.sum(0)
    g = dy * gamma
    dx = (g - g.sum(-1, keepdims=True) / d - norm * (g * norm).sum(-1, keepdims=True) / d) / sigma
    return dx, dgamma, dbeta
'''
