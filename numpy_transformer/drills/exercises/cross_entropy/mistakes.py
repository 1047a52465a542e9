"""The classic mistakes of the cross_entropy drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("ce_unstable_exp", "exp of the raw logits overflows (no max subtraction)",
            "exp(1000) = inf: the loss and gradient become NaN for large logits.",
            "z = logits - logits.max(axis=-1, keepdims=True); logp = z - log(sum(exp(z))).",
        [
            ('z = logits - logits.max(axis=-1, keepdims=True)',
             'z = logits'),
        ]),
    Mistake("ce_log_of_softmax", "log(softmax) instead of log-softmax: log(0) = -inf",
            "With large logits a probability underflows to 0 and log(0) = -inf, so the loss is inf. "
            "log-softmax computed as z - logsumexp(z) never underflows.",
            "logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True)) with z = logits - max.",
        [
            ('logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))',
             'logp = np.log(np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True))'),
        ]),
    Mistake("ce_sum_not_mean", "loss summed over the rows instead of averaged",
            "The loss is the mean over the N rows (torch's reduction='mean').",
            "loss = -logp[np.arange(N), targets].mean(); and divide the gradient by N.",
        [
            ('loss = -logp[np.arange(N), targets].mean()',
             'loss = -logp[np.arange(N), targets].sum()'),
            ('return d * (dloss / N)',
             'return d * dloss'),
        ]),
    Mistake("ce_grad_not_divided_by_n", "gradient not divided by N (the forward averages)",
            "loss = (1/N) sum_n l_n, so every row's gradient carries the 1/N.",
            "dlogits = (p - onehot) / N * dloss.",
        [
            ('return d * (dloss / N)',
             'return d * dloss'),
        ]),
    Mistake("ce_column_subtract", "p[:, targets] -= 1 subtracts whole columns",
            "p[:, targets] selects every row of each target column; the -1 belongs only at "
            "(n, targets[n]).",
            "p[np.arange(N), targets] -= 1.",
        [
            ('d[np.arange(N), targets] -= 1',
             'd[:, targets] -= 1'),
        ]),
    Mistake("ce_no_minus_one", "gradient forgot the -1 at the target (softmax instead of softmax - onehot)",
            "d(-log p_y)/dz = p - onehot(y).",
            "d = p.copy(); d[np.arange(N), targets] -= 1.",
        [
            ('d[np.arange(N), targets] -= 1',
             'pass'),
        ]),
    Mistake("ce_ignored_dloss", "upstream gradient dloss ignored",
            "The backward receives dL/dloss (not always 1: a loss weight, gradient accumulation...) "
            "and must multiply by it.",
            "dlogits = (p - onehot) / N * dloss.",
        [
            ('return d * (dloss / N)',
             'return d / N'),
        ]),
)
