"""Third-set mistakes for cross_entropy."""

MISTAKES = [
    dict(label="the max subtracted over the batch axis (axis 0) instead of per row",
         keywords=["axis", "max", "per row"],
         patch=[("z = logits - logits.max(axis=-1, keepdims=True)", "z = logits - logits.max(axis=0, keepdims=True)")]),
    dict(label="loss divided by N * V (mean over every logit) instead of N",
         keywords=["n * v", "every logit", "classes", "mean over"],
         patch=[("loss = -logp[np.arange(N), targets].mean()", "loss = -logp[np.arange(N), targets].sum() / logits.size")]),
    dict(label="the backward multiplies by N instead of dividing (1/N of the mean inverted)",
         keywords=["1/n", "divid", "multiplies by n"],
         patch=[("return d * (dloss / N)", "return d * (dloss * N)")]),
    dict(label="the target's entry zeroed (subtracts p_y instead of 1)",
         keywords=["one-hot", "onehot", "subtract 1", "minus 1"],
         patch=[("d[np.arange(N), targets] -= 1 ", "d[np.arange(N), targets] -= p[np.arange(N), targets] ")]),
]

CORRECT = '''
import numpy as np


def cross_entropy_forward(logits, targets):
    n = len(targets)
    top = np.max(logits, axis=1)
    lse = top + np.log(np.sum(np.exp(logits - top[:, None]), axis=1))
    picked = np.take_along_axis(logits, np.asarray(targets)[:, None], axis=1)[:, 0]
    loss = float(np.sum(lse - picked) / n)
    probs = np.exp(logits - lse[:, None])
    return loss, {"probs": probs, "targets": np.asarray(targets)}


def cross_entropy_backward(dloss, cache):
    probs, targets = cache["probs"], cache["targets"]
    n, v = probs.shape
    onehot = (np.arange(v)[None, :] == targets[:, None]).astype(probs.dtype)
    return (probs - onehot) * dloss / n
'''
