"""The classic mistakes of the rms_norm drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("rms_mean_not_mean_square", "the mean subtracted as in LayerNorm (std instead of root mean square)",
            "RMSNorm does not centre x: it divides x itself by sqrt(mean(x^2) + eps). Subtracting the mean "
            "first turns it into a LayerNorm without beta.",
            "ms = np.mean(x * x, axis=-1, keepdims=True); xhat = x / np.sqrt(ms + eps)  (no x - mean).",
        [
            ('ms = np.mean(x * x, axis=-1, keepdims=True)',
             'x = x - x.mean(axis=-1, keepdims=True)\n    ms = np.mean(x * x, axis=-1, keepdims=True)'),
        ]),
    Mistake("rms_eps_outside_sqrt", "eps added outside the square root",
            "x / (sqrt(mean(x^2)) + eps) differs from x / sqrt(mean(x^2) + eps), most where the values "
            "are small.",
            "rstd = 1 / np.sqrt(ms + eps).",
        [
            ('1.0 / np.sqrt(ms + eps)',
             '1.0 / (np.sqrt(ms) + eps)'),
        ]),
    Mistake("rms_backward_no_projection", "RMSNorm backward missing the -xhat*mean(dxhat*xhat) term",
            "Every x_j also moves the mean of squares, which rescales every xhat_i: that path contributes "
            "-rstd * xhat * mean(dxhat * xhat). dx = rstd * dxhat treats rstd as a constant.",
            "dx = rstd * (dxhat - xhat * mean(dxhat * xhat)).",
        [
            ('rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))',
             'rstd * dxhat'),
        ]),
    Mistake("rms_backward_no_gamma", "RMSNorm backward forgot gamma in dx",
            "y = xhat * gamma, so the gradient reaching xhat is dxhat = dy * gamma.",
            "dxhat = dy * gamma, then the usual formula with dxhat.",
        [
            ('dxhat = dy * gamma',
             'dxhat = dy'),
        ]),
)
