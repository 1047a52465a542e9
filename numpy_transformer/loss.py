"""Cross-entropy loss over vocabulary logits, as ``torch.nn.CrossEntropyLoss`` (class-index targets).

``loss = crit(logits, targets)`` then ``dlogits = crit.backward()``. Logits are (N, V) or (B, S, V)
(the class axis *last*, unlike torch's (B, V, S); targets are (N,) or (B, S)).

With ``p = softmax(z)`` (computed as ``exp(z - logsumexp(z))``, never overflowing), smoothing ``e``
and ``V`` classes, one row with target ``y`` costs::

    l = (1 - e) * (-log p_y) + e * mean_c(-log p_c)

Rows whose target is ``ignore_index`` cost 0 and get no gradient. ``reduction="mean"`` divides the
sum by the number of rows that are *not* ignored (NaN when every row is ignored, exactly as torch);
``"sum"`` sums; ``"none"`` returns the per-row losses shaped like ``targets``.
"""

from __future__ import annotations

import numpy as np

from ._checks import FLOAT_DTYPES

__all__ = ["CrossEntropyLoss", "log_softmax"]

REDUCTIONS = ("mean", "sum", "none")


def log_softmax(z, axis=-1):
    """``z - logsumexp(z)`` along ``axis``, stable for any finite input (the max is subtracted first)."""
    m = np.max(z, axis=axis, keepdims=True)
    with np.errstate(over="ignore"):                   # a spread beyond the dtype's range: -inf, exp -> 0
        shifted = z - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


class CrossEntropyLoss:
    """Softmax cross-entropy with class-index targets, the same values and gradients as torch's.

    Parameters
    ----------
    ignore_index : int
        Target value that contributes neither loss nor gradient (default -100, as torch). It may also
        be a real class id (e.g. a padding id 0).
    reduction : {"mean", "sum", "none"}
    label_smoothing : float in [0, 1]
    """

    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
            raise TypeError(f"ignore_index must be an int, got {ignore_index!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float, np.floating)) \
                or not 0.0 <= float(label_smoothing) <= 1.0:
            raise ValueError(f"label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
        self.ignore_index = int(ignore_index)
        self.reduction = reduction
        self.label_smoothing = float(label_smoothing)
        self._cache = None

    def __call__(self, logits, targets):
        return self.forward(logits, targets)

    def _check(self, logits, targets):
        if not isinstance(logits, np.ndarray):
            logits = np.asarray(logits)
        if not isinstance(targets, np.ndarray):
            targets = np.asarray(targets)
        if logits.dtype not in FLOAT_DTYPES:
            hint = (" (float16 is not supported: convert with logits.astype(np.float32))"
                    if logits.dtype == np.float16 else "")
            raise TypeError(f"logits must be float32 or float64, got dtype {logits.dtype}{hint}")
        if logits.ndim not in (2, 3):
            raise ValueError(f"logits must have shape (N, V) or (B, S, V), got shape {logits.shape}")
        if logits.shape[-1] == 0:
            raise ValueError(f"logits must have at least one class (V >= 1), got shape {logits.shape}")
        if targets.dtype.kind not in "iu":
            raise TypeError(f"targets must be an integer array of class ids, got dtype {targets.dtype}")
        if targets.shape != logits.shape[:-1]:
            raise ValueError(f"targets must have shape {logits.shape[:-1]} to match logits {logits.shape} "
                             f"(class axis last), got {targets.shape}")
        v = logits.shape[-1]
        bad = (targets != self.ignore_index) & ((targets < 0) | (targets >= v))
        if bad.any():
            first = targets[bad].flat[0]
            raise IndexError(f"targets must lie in [0, {v}) or equal ignore_index={self.ignore_index}, "
                             f"got {int(first)} ({int(bad.sum())} such target(s))")
        return logits, targets

    def forward(self, logits, targets):
        """Loss of ``logits`` (N, V) or (B, S, V) against ``targets`` (N,) or (B, S).

        Returns a 0-d array of the logits' dtype (``"mean"``/``"sum"``) or per-row losses (``"none"``).
        """
        logits, targets = self._check(logits, targets)
        dt = logits.dtype
        v = logits.shape[-1]
        z = logits.reshape(-1, v)                                                # (N, V)
        t = targets.reshape(-1)                                                  # (N,)
        keep = t != self.ignore_index                                            # (N,)
        safe_t = np.where(keep, t, 0)
        logp = log_softmax(z, axis=-1)                                           # (N, V)
        nll = -np.take_along_axis(logp, safe_t[:, None], axis=1)[:, 0]           # (N,)
        e = self.label_smoothing
        if e > 0:
            smooth = -logp.sum(axis=1)                                           # (N,) sum_c -log p_c
            per_row = dt.type(1 - e) * nll + dt.type(e / v) * smooth
        else:
            per_row = nll
        per_row = np.where(keep, per_row, dt.type(0))                            # (N,)
        count = int(keep.sum())
        if self.reduction == "none":
            out = per_row.reshape(targets.shape)
        elif self.reduction == "sum":
            out = per_row.sum()
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                out = per_row.sum() / dt.type(count) if count else dt.type(np.nan)
        self._cache = (logp, safe_t, keep, count, logits.shape, targets.shape, dt)
        return np.asarray(out, dtype=dt)

    def backward(self, dloss=None):
        """Gradient of the loss with respect to the logits, shaped like the logits.

        ``dloss``: upstream gradient, a scalar for ``"mean"``/``"sum"`` (default 1) or an array shaped
        like ``targets`` for ``"none"`` (default all ones).

        Per kept row, ``dl/dz = p - (1 - e) * onehot(y) - e / V`` (softmax minus the smoothed target
        distribution, which sums to 1); ignored rows get 0. ``"mean"`` divides by the number of kept rows
        (all-ignored: no row is kept, so the gradient is 0, as torch).
        """
        if self._cache is None:
            raise RuntimeError("CrossEntropyLoss.backward() called before forward(), or twice for one forward")
        logp, safe_t, keep, count, lshape, tshape, dt = self._cache
        n, v = logp.shape
        up = None if dloss is None else np.asarray(dloss)
        if up is not None and up.dtype.kind not in "fiu":
            raise TypeError(f"dloss must be a number or a float array, got dtype {up.dtype}")
        if self.reduction == "none":
            if up is not None and up.shape != tuple(tshape):
                raise ValueError(f"dloss must have the targets' shape {tuple(tshape)} for reduction='none', "
                                 f"got {up.shape}")
        elif up is not None and up.ndim != 0:
            raise ValueError(f"dloss must be a scalar for reduction={self.reduction!r}, got shape {up.shape}")
        self._cache = None                       # checked: only now is the forward's cache consumed
        e = self.label_smoothing
        grad = np.exp(logp)                                                      # (N, V) softmax
        grad[np.arange(n), safe_t] -= dt.type(1 - e)
        if e > 0:
            grad -= dt.type(e / v)
        if self.reduction == "none":
            w = (np.ones(tshape, dtype=dt) if up is None else up.astype(dt)).reshape(-1)
        else:
            w = np.full(n, dt.type(1) if up is None else up.astype(dt), dtype=dt)
            if self.reduction == "mean" and count:
                w = w / dt.type(count)
        w = np.where(keep, w, dt.type(0))                                        # (N,)
        grad *= w[:, None]
        return grad.reshape(lshape)

    def __repr__(self):
        return (f"CrossEntropyLoss(ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
                f"label_smoothing={self.label_smoothing})")
