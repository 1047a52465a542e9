"""A check file for ``python -m numpy_transformer check``: a hand-written LayerNorm against torch's.

    python -m numpy_transformer check docs/examples/check_layer_norm.py
    python -m numpy_transformer check docs/examples/check_layer_norm.py --dtype float32

The functions form: ``forward``, ``backward``, ``torch_fn`` and ``inputs``.
"""

import numpy as np
import torch


def forward(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last axis: x (B, S, D), gamma, beta (D,) -> (out, cache)."""
    mean = x.mean(axis=-1, keepdims=True)                                   # (B, S, 1)
    xc = x - mean                                                           # (B, S, D)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)     # (B, S, 1)
    xhat = xc * rstd                                                        # (B, S, D)
    return xhat * gamma + beta, (xhat, rstd, gamma)


def backward(dout, cache):
    """dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dgamma = sum(dout * xhat), dbeta = sum(dout)."""
    xhat, rstd, gamma = cache
    dxhat = dout * gamma                                                    # (B, S, D)
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))      # (B, S, D)
    lead = tuple(range(dout.ndim - 1))
    return dx, (dout * xhat).sum(axis=lead), dout.sum(axis=lead)            # in the order of the float inputs


def torch_fn(x, gamma, beta, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def inputs():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 4, 8)), "gamma": 1 + 0.1 * rng.standard_normal(8),
            "beta": 0.1 * rng.standard_normal(8)}
