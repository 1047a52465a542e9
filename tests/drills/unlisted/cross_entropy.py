"""Unlisted mistakes for cross_entropy."""

MISTAKES = [
    dict(label="the backward forgets the 1/N of the mean",
         keywords=["1/n", "mean", "divided by n", "factor"],
         patch=[("return d * (dloss / N)", "return d * dloss")]),
    dict(label="the backward ignores dloss (upstream gradient dropped)",
         keywords=["dloss", "upstream"],
         patch=[("return d * (dloss / N)", "return d / N")]),
    dict(label="the one-hot subtracted with the wrong sign (p + onehot)",
         keywords=["sign", "onehot", "one-hot", "target"],
         patch=[("d[np.arange(N), targets] -= 1", "d[np.arange(N), targets] += 1")]),
    dict(label="loss summed instead of averaged over the batch",
         keywords=["sum", "mean", "1/n"],
         patch=[("loss = -logp[np.arange(N), targets].mean()", "loss = -logp[np.arange(N), targets].sum()")]),
    dict(label="the one-hot subtracted from whole columns (p[:, targets])",
         keywords=["column", "p[:, targets]", "one per row", "index"],
         patch=[("d[np.arange(N), targets] -= 1", "d[:, targets] -= 1")]),
    dict(label="the gradient of the loss sign flipped (onehot - p)",
         keywords=["sign", "negat", "flip"],
         patch=[("return d * (dloss / N)", "return -d * (dloss / N)")]),
]

CORRECT = '''
import numpy as np


def cross_entropy_forward(logits, targets):
    rows = np.arange(len(targets))
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(shifted), axis=1))
    losses = lse - shifted[rows, targets]
    probs = np.exp(shifted - lse[:, None])
    return float(np.mean(losses)), {"probs": probs, "targets": targets}


def cross_entropy_backward(dloss, cache):
    probs, targets = cache["probs"], cache["targets"]
    n = probs.shape[0]
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), targets] = 1.0
    return (probs - onehot) * dloss / n
'''
