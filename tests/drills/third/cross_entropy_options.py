"""Third-set mistakes for cross_entropy_options."""

MISTAKES = [
    dict(label="the backward's uniform target weighted twice: e * (p - e/V) instead of e * (p - 1/V)",
         keywords=["uniform", "e/v", "1/v"],
         patch=[("d_smooth = p - 1.0 / V ", "d_smooth = p - e / V ")]),
    dict(label="ignored rows still pay the smoothing term in the loss",
         keywords=["ignored", "ignore_index", "ignore"],
         patch=[("loss = (((1 - e) * nll + e * smooth) * keep).sum() / n_keep", "loss = ((1 - e) * nll * keep + e * smooth).sum() / n_keep")]),
    dict(label="the backward's nll gradient not weighted by 1 - e",
         keywords=["1 - e", "weight", "smoothing"],
         patch=[("d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]", "d = (d_nll + e * d_smooth) * keep[:, None]")]),
    dict(label="the smoothing term uses the log-probability of the mean instead of the mean log-probability",
         keywords=["log of the mean", "mean log", "smoothing term"],
         patch=[("smooth = -logp.mean(axis=-1) ", "smooth = -np.log(np.exp(logp).mean(axis=-1)) ")]),
]

CORRECT = '''
import numpy as np


def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
    n, v = logits.shape
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.flatnonzero(targets != ignore_index)
    q = np.full((len(rows), v), label_smoothing / v)
    q[np.arange(len(rows)), targets[rows]] += 1.0 - label_smoothing
    loss = -(q * logp[rows]).sum() / len(rows)
    return loss, (np.exp(logp), rows, q)


def cross_entropy_backward(dloss, cache):
    p, rows, q = cache
    out = np.zeros_like(p)
    out[rows] = (p[rows] - q) * (dloss / len(rows))
    return out
'''
