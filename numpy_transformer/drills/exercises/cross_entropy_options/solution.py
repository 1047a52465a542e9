"""Cross-entropy with ignore_index and label smoothing (torch's reduction='mean'), forward and
backward."""

import numpy as np


def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
    """logits (N, V), targets (N,) -> (loss (a scalar), cache).

    Each kept row costs (1 - e) * (-logp_y) + e * (-(1/V) sum_c logp_c), which is -sum_c q_c logp_c
    with q = (1 - e) onehot(y) + e / V; ignored rows cost nothing and the mean divides by the number
    of kept rows.
    """
    N, V = logits.shape
    e = label_smoothing
    z = logits - logits.max(axis=-1, keepdims=True)             # (N, V)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))    # (N, V) log-probabilities
    keep = targets != ignore_index                              # (N,) the rows that count
    n_keep = keep.sum()
    t = np.where(keep, targets, 0)                              # (N,) a valid index on every row
    nll = -logp[np.arange(N), t]                                # (N,) -logp_y
    smooth = -logp.mean(axis=-1)                                # (N,) -(1/V) sum_c logp_c
    loss = (((1 - e) * nll + e * smooth) * keep).sum() / n_keep
    return loss, (np.exp(logp), keep, t, e, n_keep)


def cross_entropy_backward(dloss, cache):
    """dloss (a scalar) -> dlogits (N, V).

    With d logp_c / dz_k = [c = k] - p_k: d(-logp_y)/dz = p - onehot(y) and d(-mean_c logp_c)/dz =
    p - 1/V, so a kept row's gradient is p - q; ignored rows get none; the mean brings 1 / n_keep.
    """
    p, keep, t, e, n_keep = cache
    N, V = p.shape
    d_nll = p - np.eye(V)[t]                                    # (N, V)
    d_smooth = p - 1.0 / V                                      # (N, V)
    d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]        # ignored rows: no gradient
    return d * (dloss / n_keep)
