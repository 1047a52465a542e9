"""The cross_entropy drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import functional as F


def cross_entropy_forward(logits, targets):
    n = logits.shape[0]
    z = logits - logits.max(axis=-1, keepdims=True)
    p, cache = F.softmax_forward(z)
    loss = -(z[np.arange(n), targets] - np.log(np.exp(z).sum(axis=-1))).mean()
    return loss, (p, targets)
def cross_entropy_backward(dloss, cache):
    p, targets = cache
    onehot = np.eye(p.shape[1])[targets]
    return (p - onehot) * dloss / p.shape[0]
