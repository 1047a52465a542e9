"""Unlisted mistakes for cross_entropy_options."""

MISTAKES = [
    dict(label="mean over all N rows instead of the kept rows (ignored rows counted)",
         keywords=["ignore", "kept", "n_keep", "count"],
         patch=[("loss = (((1 - e) * nll + e * smooth) * keep).sum() / n_keep",
                 "loss = (((1 - e) * nll + e * smooth) * keep).sum() / N")]),
    dict(label="ignored rows still get a gradient",
         keywords=["ignore", "ignored rows", "keep", "mask"],
         patch=[("d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]", "d = ((1 - e) * d_nll + e * d_smooth)")]),
    dict(label="smoothing term sums over classes instead of averaging (missing 1/V)",
         keywords=["1/v", "smooth", "mean", "sum"],
         patch=[("smooth = -logp.mean(axis=-1) ", "smooth = -logp.sum(axis=-1) ")]),
    dict(label="backward smoothing term p - 1 instead of p - 1/V",
         keywords=["1/v", "smooth", "label_smoothing"],
         patch=[("d_smooth = p - 1.0 / V ", "d_smooth = p - 1.0 ")]),
    dict(label="smoothing weights swapped: e on the nll and 1 - e on the uniform term (backward)",
         keywords=["smooth", "swapped", "label_smoothing", "1 - e"],
         patch=[("d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]",
                 "d = (e * d_nll + (1 - e) * d_smooth) * keep[:, None]")]),
    dict(label="the backward divides by N instead of the number of kept rows",
         keywords=["n_keep", "kept", "ignore", "count"],
         patch=[("return d * (dloss / n_keep)", "return d * (dloss / N)")]),
    dict(label="the backward forgets dloss",
         keywords=["dloss", "upstream"],
         patch=[("return d * (dloss / n_keep)", "return d / n_keep")]),
]

CORRECT = '''
import numpy as np


def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
    n, vocab = logits.shape
    valid = targets != ignore_index
    safe = np.where(valid, targets, 0)
    mx = logits.max(axis=1, keepdims=True)
    logz = mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True))
    logp = logits - logz
    target_dist = np.full((n, vocab), label_smoothing / vocab)
    target_dist[np.arange(n), safe] += 1.0 - label_smoothing
    per_row = -(target_dist * logp).sum(axis=1)
    count = int(valid.sum())
    loss = per_row[valid].sum() / count
    return loss, (np.exp(logp), target_dist, valid, count)


def cross_entropy_backward(dloss, cache):
    probs, target_dist, valid, count = cache
    grad = (probs - target_dist) * valid[:, None].astype(probs.dtype)
    return grad * dloss / count
'''
