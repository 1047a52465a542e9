"""Fresh unlisted mistakes for cross_entropy."""

MISTAKES = [
    dict(label="log-sum-exp of the unshifted logits subtracted from the shifted ones",
         keywords=["max", "shift", "log-sum-exp", "logsumexp"],
         patch=[("logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))", "logp = z - np.log(np.exp(logits).sum(axis=-1, keepdims=True))")]),
    dict(label="the loss gathers logp[:, targets] (an N x N block) instead of one entry per row",
         keywords=["index", "gather", "target", "per row"],
         patch=[("loss = -logp[np.arange(N), targets].mean()", "loss = -logp[:, targets].mean()")]),
    dict(label="the backward subtracts 1 from every entry instead of the target's",
         keywords=["one-hot", "onehot", "target"],
         patch=[("d[np.arange(N), targets] -= 1 ", "d -= 1 ")]),
    dict(label="the cache keeps the log-probabilities and the backward uses them as probabilities",
         keywords=["probabilit", "log", "softmax"],
         patch=[("return loss, (np.exp(logp), targets)", "return loss, (logp, targets)")]),
    dict(label="the loss not negated (mean log-probability)",
         keywords=["sign", "negat", "minus"],
         patch=[("loss = -logp[np.arange(N), targets].mean()", "loss = logp[np.arange(N), targets].mean()")]),
    dict(label="the backward divides by the number of classes V instead of N",
         keywords=["1/n", "batch size", "mean", "divide"],
         patch=[("    N = p.shape[0]\n    d = p.copy()", "    N = p.shape[1]\n    d = p.copy()")]),
]

CORRECT = '''
import numpy as np


def cross_entropy_forward(logits, targets):
    top = np.max(logits, axis=1)
    lse = top + np.log(np.sum(np.exp(logits - top[:, None]), axis=1))
    picked = np.take_along_axis(logits, targets[:, None], axis=1)[:, 0]
    probs = np.exp(logits - lse[:, None])
    return float(np.mean(lse - picked)), {"probs": probs, "targets": targets}


def cross_entropy_backward(dloss, cache):
    probs, targets = cache["probs"], cache["targets"]
    n, v = probs.shape
    onehot = (np.arange(v)[None, :] == targets[:, None]).astype(probs.dtype)
    return (probs - onehot) * dloss / n
'''
