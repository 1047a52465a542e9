"""Drill: cross-entropy with ignore_index and label_smoothing (as torch.nn.functional.cross_entropy,
reduction='mean'), forward and backward.

Shape letters: N rows (e.g. B*S tokens), V classes. logits (N, V), targets (N,) ints.

* ignore_index: a row whose target equals it costs nothing, gets no gradient and is not counted in
  the mean: the loss is the sum over the kept rows divided by the number of kept rows. It may be a
  real class id (0, a padding token) or the default -100 (not a valid index: do not index with it).
* label_smoothing e: the target distribution of a kept row with target y is
      q = (1 - e) * onehot(y) + e / V          (the e is spread over all V classes, y included)
  and the row costs -sum_c q_c log softmax(logits)_c.

Conventions (the grader checks them):
* forward returns (loss, cache) with loss a scalar (a float or a 0-d array); backward takes dloss,
  the upstream gradient (a scalar, not always 1), and returns dlogits (N, V);
* every case keeps at least one row; some have huge logits (around +-1000): nothing may become NaN;
* float64 throughout; do not modify the inputs in place.

Hints:
* log softmax(z) = z - log(sum(exp(z))) after subtracting the row max.
* For one kept row, the gradient of -sum_c q_c logp_c with respect to z is short: work it out for
  q = onehot first, then for the uniform part.
* A boolean keep = targets != ignore_index, and a safe index np.where(keep, targets, 0).
"""

import numpy as np


def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
    """Mean cross-entropy over the rows whose target is not ignore_index, with label smoothing.

    Parameters
    ----------
    logits : ndarray, shape (N, V)
    targets : ndarray of int, shape (N,), values in [0, V) or equal to ignore_index
    ignore_index : int
    label_smoothing : float in [0, 1]

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
