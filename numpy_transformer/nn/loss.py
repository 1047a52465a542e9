"""``CrossEntropyLoss``, as ``torch.nn.CrossEntropyLoss``: a thin wrapper of the functional pair.

``loss = crit(input, target)`` then ``dinput = crit.backward()`` (``crit.backward(dout)`` with an
upstream gradient, of the output's shape for ``reduction="none"``). The maths, the shapes and the
derivation live in :mod:`numpy_transformer.functional.loss` (``F.cross_entropy_forward/backward``).

The layout is torch's: the class axis is dim 1, ``input`` (C,), (N, C) or (N, C, d1, ...) with
class-index targets (), (N,) or (N, d1, ...), or probability targets of the input's shape. A model's
(B, S, V) logits go in as ``crit(logits.reshape(-1, V), targets.reshape(-1))`` (or transposed to
(B, V, S)); passed as they are they mean N=B, C=S, d1=V, which is silently wrong when S == V.
"""

from __future__ import annotations

import numpy as np

from ..functional.loss import REDUCTIONS, cross_entropy_backward, cross_entropy_forward, log_softmax
from ..utils.checks import check_number

__all__ = ["CrossEntropyLoss", "log_softmax"]


class CrossEntropyLoss:
    """Softmax cross-entropy, the same values and gradients as ``torch.nn.CrossEntropyLoss``.

    Parameters
    ----------
    weight : array_like (C,), optional
        Per-class weights (copied; cast to the input's dtype at each call). With index targets,
        ``"mean"`` divides by the sum of the target classes' weights over the positions not ignored.
    size_average, reduce : None
        torch's deprecated arguments, kept in their places so that positional calls line up. Any
        value other than None is refused, with the ``reduction`` that says the same (torch maps them
        with a deprecation warning).
    ignore_index : int
        An index target equal to it contributes neither loss nor gradient (default -100, as torch). It
        may also be a real class id (e.g. a padding id 0). Probability targets accept only -100.
    reduction : {"mean", "sum", "none"}
    label_smoothing : float in [0, 1]
        A negative value is refused (torch silently treats it as 0).

    Notes
    -----
    All ignored (or an empty batch) under ``"mean"`` gives NaN with a zero gradient, as torch; kept
    targets whose weights sum to 0 give NaN with a NaN gradient on those positions, as torch.
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        for name, value in (("size_average", size_average), ("reduce", reduce)):
            if value is not None:
                raise TypeError(f"{name}={value!r} is torch's deprecated spelling and is not supported: "
                                "use reduction='mean' (the default), 'sum' or 'none' instead")
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
            raise TypeError(f"ignore_index must be an int, got {ignore_index!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        check_number(label_smoothing, "label_smoothing", 0.0, 1.0)
        if weight is not None:
            weight = np.array(weight)
            if weight.dtype.kind not in "fiu" or weight.ndim != 1:
                raise ValueError(f"weight must be a 1-D array of per-class weights (C,), got "
                                 f"{weight.dtype} array of shape {weight.shape}")
            weight = weight.astype(np.float64) if weight.dtype.kind != "f" else weight
        self.weight = weight
        self.ignore_index = int(ignore_index)
        self.reduction = reduction
        self.label_smoothing = float(label_smoothing)
        self._cache = None

    def __call__(self, input, target):
        return self.forward(input, target)

    def forward(self, input, target):
        """The loss of ``input`` logits (class axis at dim 1) against ``target``.

        Returns a 0-d array of the input's dtype (``"mean"``/``"sum"``) or the per-position losses
        (``"none"``). See :func:`numpy_transformer.functional.cross_entropy_forward`.
        """
        self._cache = None                       # a refused call leaves no stale forward behind
        out, self._cache = cross_entropy_forward(input, target, self.weight, self.ignore_index, self.reduction,
                                                 self.label_smoothing)
        return out

    def backward(self, dout=None):
        """Gradient of the loss with respect to the input, shaped like the input.

        ``dout``: upstream gradient, a scalar for ``"mean"``/``"sum"`` (default 1) or an array shaped
        like the output for ``"none"`` (default all ones). A refused ``dout`` keeps the forward's
        cache, so a corrected call still works.
        """
        if self._cache is None:
            raise RuntimeError("CrossEntropyLoss.backward() called before forward(), or twice for one forward")
        cache = self._cache
        if dout is None:
            dout = np.ones(cache.out_shape, dtype=cache.logp.dtype) if self.reduction == "none" else 1.0
        grad = cross_entropy_backward(dout, cache)
        self._cache = None                       # checked: only now is the forward's cache consumed
        return grad

    def __repr__(self):
        w = "" if self.weight is None else f"weight={self.weight!r}, "
        return (f"CrossEntropyLoss({w}ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
                f"label_smoothing={self.label_smoothing})")
