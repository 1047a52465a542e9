"""Drill: a linear layer y = x W^T + b (as torch.nn.Linear), forward and backward.

Shape letters: N... any leading dimensions (e.g. B, S), Din input features, Dout output features.

Conventions (the grader checks them):
* W has torch's layout (Dout, Din): row o holds the weights of output o.
* forward returns (y, cache); backward returns (dx, dW, db), each shaped like what it is the
  gradient of.
* x may have one or several leading dimensions; float64 throughout; do not modify the inputs in
  place.

Hints:
* Write y[n, o] = sum_i x[n, i] W[o, i] + b[o] and differentiate one index at a time.
* A parameter's gradient sums over every position that used it: flatten the leading dims first.
* Sanity check: the shapes alone almost force the answer.
"""

import numpy as np


def linear_forward(x, W, b):
    """y = x W^T + b.

    Parameters
    ----------
    x : ndarray, shape (N..., Din)
    W : ndarray, shape (Dout, Din)
    b : ndarray, shape (Dout,)

    Returns
    -------
    y : ndarray, shape (N..., Dout)
    cache : anything your backward needs
    """
    raise NotImplementedError


def linear_backward(dy, cache):
    """Gradients given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., Dout)
    cache : what linear_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., Din)
    dW : ndarray, shape (Dout, Din)
    db : ndarray, shape (Dout,)
    """
    raise NotImplementedError
