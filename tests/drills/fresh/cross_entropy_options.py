"""Fresh unlisted mistakes for cross_entropy_options."""

MISTAKES = [
    dict(label="smoothing spread over the V - 1 other classes (target excluded) in the forward",
         keywords=["smoothing", "1/v", "uniform", "v - 1"],
         patch=[("smooth = -logp.mean(axis=-1) ", "smooth = -(logp.sum(axis=-1) - logp[np.arange(N), t]) / (V - 1) ")]),
    dict(label="smoothing weights swapped in the forward: e on the nll, 1 - e on the uniform term",
         keywords=["smoothing", "swap", "weight"],
         patch=[("loss = (((1 - e) * nll + e * smooth) * keep).sum() / n_keep", "loss = ((e * nll + (1 - e) * smooth) * keep).sum() / n_keep")]),
    dict(label="the backward ignores label smoothing (p - onehot only)",
         keywords=["smoothing", "label smoothing"],
         patch=[("d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]", "d = d_nll * keep[:, None]")]),
    dict(label="the forward sums the ignored rows' losses too (only the denominator excludes them)",
         keywords=["ignore", "ignored", "mask"],
         patch=[("loss = (((1 - e) * nll + e * smooth) * keep).sum() / n_keep", "loss = ((1 - e) * nll + e * smooth).sum() / n_keep")]),
    dict(label="ignored rows detected as targets >= 0 instead of targets != ignore_index",
         keywords=["ignore_index", "ignored", "class id"],
         patch=[("keep = targets != ignore_index ", "keep = targets >= 0 ")]),
]

CORRECT = '''
import numpy as np


def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
    n, v = logits.shape
    live = np.flatnonzero(targets != ignore_index)
    shifted = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    logq = shifted - lse
    probs = np.exp(logq)
    target = np.zeros((n, v))
    target[live, targets[live]] = 1.0 - label_smoothing
    target[live] += label_smoothing / v
    count = len(live)
    loss = -(target * logq).sum() / count
    return loss, {"probs": probs, "target": target, "live": live, "count": count}


def cross_entropy_backward(dloss, cache):
    out = np.zeros_like(cache["probs"])
    live = cache["live"]
    out[live] = cache["probs"][live] - cache["target"][live]
    return out * (dloss / cache["count"])
'''
