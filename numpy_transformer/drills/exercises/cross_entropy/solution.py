"""Mean cross-entropy fused with softmax, forward and backward."""

import numpy as np


def cross_entropy_forward(logits, targets):
    """logits (N, V), targets (N,) int in [0, V) -> (loss (a scalar), cache).

    loss = -(1/N) sum_n log softmax(logits_n)[targets_n], with the log-softmax computed as
    z - log(sum(exp(z))), z = logits - max: exp never overflows and log never sees an underflowed 0.
    """
    N = logits.shape[0]
    z = logits - logits.max(axis=-1, keepdims=True)             # (N, V)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))    # (N, V) log-probabilities
    loss = -logp[np.arange(N), targets].mean()
    return loss, (np.exp(logp), targets)


def cross_entropy_backward(dloss, cache):
    """dloss (a scalar) -> dlogits (N, V).

    For one row, d(-log p_y)/dz_k = p_k - [k == y] (softmax and log cancel into this simple form);
    the mean brings 1/N and the upstream gradient multiplies everything.
    """
    p, targets = cache
    N = p.shape[0]
    d = p.copy()                                                # (N, V)
    d[np.arange(N), targets] -= 1                               # one per row, not p[:, targets]
    return d * (dloss / N)
