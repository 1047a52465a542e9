"""Configurable implementations of the training drills (dropout, cross-entropy with ``ignore_index`` and
label smoothing, one AdamW step), used to recognise the classic mistakes; re-exported by :mod:`.variants`.

As in :mod:`.variants`, each ``*_impl(**knobs)`` is correct with its default knobs and written
independently of :mod:`numpy_transformer.functional` and :mod:`numpy_transformer.optim`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


# --------------------------------------------------------------------------------------------------
# dropout
# --------------------------------------------------------------------------------------------------


def dropout_impl(scale="forward_and_backward", backward_mask="cached", at_eval="identity", keep="ge_p"):
    """Inverted dropout ``y = x * keep / (1 - p)`` with ``keep = rng.random(x.shape) >= p``.

    ``scale``: "forward_and_backward" (correct), "none" (no 1/(1-p) anywhere), "forward_only" (the
    backward forgets it); ``backward_mask``: "cached" (correct) or "resampled" (the backward draws a new
    mask from the same generator); ``at_eval``: "identity" (correct) or "dropped" (training=False still
    drops); ``keep``: "ge_p" (correct) or "lt_p" (p read as the keep probability: keep = u < p, 1/p).
    """

    def draw(rng, shape, p):
        u = rng.random(shape)
        return u < p if keep == "lt_p" else u >= p

    def factor(p):
        kept = p if keep == "lt_p" else 1.0 - p
        return 0.0 if kept == 0.0 else 1.0 / kept

    def dropout_forward(x, p, rng, training=True):
        if not training and at_eval == "identity":
            return x.copy(), (None, 1.0, rng, p)
        mask = draw(rng, x.shape, p)
        s = 1.0 if scale == "none" else factor(p)
        return x * mask * s, (mask, s, rng, p)

    def dropout_backward(dy, cache):
        mask, s, rng, p = cache
        if mask is None:
            return dy.copy()
        if backward_mask == "resampled":
            mask = draw(rng, dy.shape, p)
        if scale == "forward_only":
            s = 1.0
        return dy * mask * s

    return SimpleNamespace(dropout_forward=dropout_forward, dropout_backward=dropout_backward)


# --------------------------------------------------------------------------------------------------
# cross-entropy with ignore_index and label smoothing
# --------------------------------------------------------------------------------------------------


def cross_entropy_options_impl(denominator="kept", smooth_over="V", smooth_ignored=False, ignored_grad="zero"):
    """Mean cross-entropy with ``ignore_index`` and ``label_smoothing`` (torch's semantics).

    ``denominator``: "kept" (correct: the number of targets not ignored) or "all" (N); ``smooth_over``:
    "V" (correct: q = (1 - e) onehot + e / V) or "V-1" (the target gets 1 - e, the V - 1 others
    e / (V - 1)); ``smooth_ignored``: True gives ignored rows the smoothing term (and its gradient);
    ``ignored_grad``: "zero" (correct), "p" (the backward forgets to zero ignored rows, whose onehot is
    zero) or "first_class" (the same, their target replaced by class 0)."""

    def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
        n, v = logits.shape
        e = label_smoothing
        z = logits - logits.max(axis=-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        keep = targets != ignore_index
        t = np.where(keep, targets, 0)
        onehot = np.eye(v)[t] * keep[:, None]
        if smooth_over == "V-1":
            q = (1 - e) * onehot + e / (v - 1) * (1 - np.eye(v)[t]) * keep[:, None]
        else:
            q = (1 - e) * onehot + e / v * (np.ones((n, 1)) if smooth_ignored else keep[:, None])
        denom = float(keep.sum()) if denominator == "kept" else float(n)
        loss = -(q * logp).sum() / denom
        return loss, (np.exp(logp), q, keep, t, e, denom)

    def cross_entropy_backward(dloss, cache):
        p, q, keep, t, e, denom = cache
        d = p * q.sum(axis=-1, keepdims=True) - q
        if ignored_grad != "zero":
            v = p.shape[1]
            gone = ~keep[:, None]
            onehot = np.eye(v)[t] if ignored_grad == "first_class" else 0.0
            d = np.where(gone, (1 - e) * (p - onehot) + e * (p - 1.0 / v), d)
        return d * (dloss / denom)

    return SimpleNamespace(cross_entropy_forward=cross_entropy_forward,
                           cross_entropy_backward=cross_entropy_backward)


# --------------------------------------------------------------------------------------------------
# one AdamW step
# --------------------------------------------------------------------------------------------------


def adamw_impl(bias_correction=True, decay="decoupled", eps_place="outside", count="next"):
    """One step of torch.optim.AdamW on a copy of ``param``.

    ``bias_correction``: False divides by nothing; ``decay``: "decoupled" (correct: param *= 1 - lr * wd
    before the Adam step), "l2" (Adam's L2: wd * param added to the gradient), "no_lr" (param *= 1 - wd);
    ``eps_place``: "outside" (correct: sqrt(v_hat) + eps) or "inside" (sqrt(v_hat + eps)); ``count``:
    "next" (correct: t = step + 1, the number of this update) or "current" (t = step: the first step
    divides by 1 - beta^0 = 0)."""

    def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        b1, b2 = betas
        t = step + 1 if count == "next" else step
        p = param.copy()
        g = grad
        if decay == "l2":
            g = g + weight_decay * p
        elif decay == "no_lr":
            p = p * (1 - weight_decay)
        else:
            p = p * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        with np.errstate(divide="ignore", invalid="ignore"):
            c1 = 1 - b1 ** t if bias_correction else 1.0
            c2 = 1 - b2 ** t if bias_correction else 1.0
            m_hat, v_hat = m / c1, v / c2
            denom = np.sqrt(v_hat + eps) if eps_place == "inside" else np.sqrt(v_hat) + eps
            p = p - lr * m_hat / denom
        return p, m, v

    return SimpleNamespace(adamw_step=adamw_step)
