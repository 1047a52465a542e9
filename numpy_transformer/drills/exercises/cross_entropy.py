"""The cross_entropy drill: mean cross-entropy fused with softmax (log-sum-exp) and its backward.

The drill's logits are (N, V), torch's (N, C) layout; its reference is the library's functional pair
(``F.cross_entropy_forward/backward``, checked against torch in the tests)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


def _draw_cross_entropy(rng, i):
    edges = [(1, 1, 2.0), (1, 5, 2.0), (4, 3, 1000.0), (6, 4, 2.0), (3, 7, 2.0)]
    if i < len(edges):
        n, v, scale = edges[i]
    else:
        n, v = int(rng.integers(1, 9)), int(rng.integers(2, 9))
        scale = 1000.0 if rng.random() < 0.2 else 2.0
    logits = scale * rng.standard_normal((n, v))
    targets = rng.integers(0, v, size=n).astype(np.int64)
    dloss = float(rng.uniform(0.5, 2.0))
    tags = ["large logits (exp overflows, probabilities underflow)"] if scale > 100 else []
    return Case({"logits": logits, "targets": targets, "dloss": dloss},
                _desc(f"logits {_shape(logits)}", f"dloss={dloss:.3f}"), tags, {"N": n, "dloss": dloss})


def _run_cross_entropy(rec, c):
    loss, cache = rec.pair("cross_entropy_forward",
                           rec.call("cross_entropy_forward", c["logits"], c["targets"]), "(loss, cache)")
    rec.output("loss", loss)
    (dlogits,) = rec.unpack("cross_entropy_backward",
                            rec.call("cross_entropy_backward", c["dloss"], cache), ["dlogits"])
    rec.output("dlogits", dlogits)


def _ref_cross_entropy():
    return SimpleNamespace(cross_entropy_forward=lambda logits, targets: F.cross_entropy_forward(logits, targets),
                           cross_entropy_backward=F.cross_entropy_backward)


CROSS_ENTROPY = Exercise(
    name="cross_entropy", difficulty="medium", minutes=12,
    covers="mean cross-entropy fused with softmax (log-sum-exp), backward (softmax - onehot) / N",
    functions=("cross_entropy_forward", "cross_entropy_backward"),
    outputs=(("loss", "cross_entropy_forward"), ("dlogits", "cross_entropy_backward")),
    library=("softmax_forward", "softmax_backward"),
    draw=_draw_cross_entropy, run=_run_cross_entropy, reference=_ref_cross_entropy,
    variant=V.cross_entropy_impl, n_edge=5,
    mistakes=(
        Mistake("ce_unstable_exp", "exp of the raw logits overflows (no max subtraction)",
                "exp(1000) = inf: the loss and gradient become NaN for large logits.",
                "z = logits - logits.max(axis=-1, keepdims=True); logp = z - log(sum(exp(z))).",
                ({"logp": "naive"}, {"logp": "naive_exp"})),
        Mistake("ce_log_of_softmax", "log(softmax) instead of log-softmax: log(0) = -inf",
                "With large logits a probability underflows to 0 and log(0) = -inf, so the loss is inf. "
                "log-softmax computed as z - logsumexp(z) never underflows.",
                "logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True)) with z = logits - max.",
                ({"logp": "log_probs"},)),
        Mistake("ce_sum_not_mean", "loss summed over the rows instead of averaged",
                "The loss is the mean over the N rows (torch's reduction='mean').",
                "loss = -logp[np.arange(N), targets].mean(); and divide the gradient by N.",
                ({"reduction": "sum"},)),
        Mistake("ce_grad_not_divided_by_n", "gradient not divided by N (the forward averages)",
                "loss = (1/N) sum_n l_n, so every row's gradient carries the 1/N.",
                "dlogits = (p - onehot) / N * dloss.",
                ({"backward": "no_div_n"},)),
        Mistake("ce_column_subtract", "p[:, targets] -= 1 subtracts whole columns",
                "p[:, targets] selects every row of each target column; the -1 belongs only at "
                "(n, targets[n]).",
                "p[np.arange(N), targets] -= 1.",
                ({"backward": "column_subtract"},)),
        Mistake("ce_no_minus_one", "gradient forgot the -1 at the target (softmax instead of softmax - onehot)",
                "d(-log p_y)/dz = p - onehot(y).",
                "d = p.copy(); d[np.arange(N), targets] -= 1.",
                ({"backward": "no_minus_one"},)),
        Mistake("ce_ignored_dloss", "upstream gradient dloss ignored",
                "The backward receives dL/dloss (not always 1: a loss weight, gradient accumulation...) "
                "and must multiply by it.",
                "dlogits = (p - onehot) / N * dloss.",
                ({"backward": "ignore_dloss"},)),
    ),
)
