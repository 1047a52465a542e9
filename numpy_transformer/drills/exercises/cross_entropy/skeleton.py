"""Drill: mean cross-entropy loss fused with softmax (as torch.nn.functional.cross_entropy), forward
and backward.

Shape letters: N rows (e.g. B*S tokens), V classes (the vocabulary). The logits are (N, V), torch's
(N, C) layout: one row per token, the class axis last (= dim 1). A model's (B, S, V) logits become
these rows with logits.reshape(-1, V) and targets.reshape(-1).

    loss = -(1/N) * sum_n log softmax(logits[n])[targets[n]]

Conventions (the grader checks them):
* forward returns (loss, cache) with loss a scalar (a float or a 0-d array);
* backward takes dloss, the upstream gradient dL/dloss (a scalar, not always 1), and returns
  dlogits;
* some cases have huge logits (around +-1000): nothing may overflow to inf or become NaN, and the
  loss must stay finite;
* float64 throughout; do not modify the inputs in place.

Hints:
* log softmax(z) = z - log(sum(exp(z))), and subtracting the row max first changes nothing.
* Differentiate -log softmax(z)[y] with respect to z_k: the softmax and the log cancel into
  something very short.
* Selecting one element per row: logp[np.arange(N), targets].
"""

import numpy as np


def cross_entropy_forward(logits, targets):
    """Mean cross-entropy over the N rows.

    Parameters
    ----------
    logits : ndarray, shape (N, V)
    targets : ndarray of int, shape (N,), values in [0, V)

    Returns
    -------
    loss : float (or 0-d array)
    cache : anything your backward needs
    """
    raise NotImplementedError


def cross_entropy_backward(dloss, cache):
    """dL/dlogits given dloss = dL/dloss.

    Parameters
    ----------
    dloss : float
    cache : what cross_entropy_forward returned

    Returns
    -------
    dlogits : ndarray, shape (N, V)
    """
    raise NotImplementedError
