"""The classic mistakes of the layer_norm drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("ln_unbiased_variance", "unbiased variance (divided by D-1) instead of biased (by D)",
            "LayerNorm (torch, the paper) uses the population variance mean((x - mu)^2). "
            "np.var(ddof=1) / torch.var(unbiased=True) divide by D-1.",
            "var = np.mean((x - mu)**2, axis=-1, keepdims=True)  (np.var's default ddof=0).",
        [
            ('var = np.mean(xc * xc, axis=-1, keepdims=True)',
             'var = np.var(x, axis=-1, ddof=1, keepdims=True)'),
        ]),
    Mistake("ln_eps_outside_sqrt", "eps added outside the square root",
            "(x - mu) / (sqrt(var) + eps) differs from (x - mu) / sqrt(var + eps), most where the "
            "variance is small.",
            "rstd = 1 / np.sqrt(var + eps).",
        [
            ('1.0 / np.sqrt(var + eps)',
             '1.0 / (np.sqrt(var) + eps)'),
        ]),
    Mistake("ln_wrong_axis", "normalised over the batch/positions instead of the features (a BatchNorm)",
            "LayerNorm normalises each position's D features: statistics over axis=-1 only.",
            "mu = x.mean(axis=-1, keepdims=True); var likewise over axis=-1.",
        [
            ('mu = x.mean(axis=-1, keepdims=True)',
             'mu = x.mean(axis=tuple(range(x.ndim - 1)), keepdims=True)'),
            ('np.mean(xc * xc, axis=-1, keepdims=True)',
             'np.mean(xc * xc, axis=tuple(range(x.ndim - 1)), keepdims=True)'),
            ('dxhat.mean(axis=-1, keepdims=True)',
             'dxhat.mean(axis=lead, keepdims=True)'),
            ('np.mean(dxhat * xhat, axis=-1, keepdims=True)',
             'np.mean(dxhat * xhat, axis=lead, keepdims=True)'),
        ]),
    Mistake("ln_backward_no_mean_term", "LayerNorm backward missing the -mean(dxhat) term",
            "Every x_j also moves the mean mu, which shifts every xhat_i: that path contributes "
            "-rstd * mean(dxhat).",
            "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
        [
            ('dxhat - dxhat.mean(axis=-1, keepdims=True)\n',
             'dxhat\n'),
        ]),
    Mistake("ln_backward_no_variance_term", "LayerNorm backward missing the -xhat*mean(dxhat*xhat) term",
            "Every x_j also moves the variance, which rescales every xhat_i: that path contributes "
            "-rstd * xhat * mean(dxhat * xhat).",
            "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
        [
            ('\n                 - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))',
             ')'),
        ]),
    Mistake("ln_backward_constant_stats", "LayerNorm backward treats mean and variance as constants",
            "dx = rstd * dxhat is the gradient only if mu and var did not depend on x.",
            "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
        [
            ('rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)\n                 - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))',
             'rstd * dxhat'),
        ]),
    Mistake("ln_backward_no_gamma", "LayerNorm backward forgot gamma in dx",
            "y = xhat * gamma + beta, so the gradient reaching xhat is dxhat = dy * gamma.",
            "dxhat = dy * gamma, then the usual formula with dxhat.",
        [
            ('dxhat = dy * gamma',
             'dxhat = dy'),
        ]),
)
