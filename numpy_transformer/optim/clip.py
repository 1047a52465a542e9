"""Gradient clipping by the joint norm of all gradients, as ``torch.nn.utils.clip_grad_norm_``."""

from __future__ import annotations

import math

import numpy as np

from ..nn import Module, Parameter
from ..utils.checks import check_number

__all__ = ["clip_grad_norm_", "vector_norm"]


def vector_norm(x, ord):
    """``torch.linalg.vector_norm(x, ord)`` of a flat array: ``inf`` max ``|x|``, ``-inf`` min ``|x|``,
    ``0`` the count of non-zeros, otherwise ``sum(|x|^ord)^(1/ord)`` (``ord = 2`` through a dot product)."""
    x = x.ravel()
    if ord == math.inf or ord == -math.inf:
        if x.size == 0:
            raise RuntimeError(f"the {ord} norm of an empty gradient is undefined (it has no identity), as in "
                               "torch.linalg.vector_norm; leave empty parameters out of clipping")
        return np.max(np.abs(x)) if ord > 0 else np.min(np.abs(x))
    if ord == 0:
        return x.dtype.type(np.count_nonzero(x))
    if ord == 2:
        return np.sqrt(np.dot(x, x))
    if ord == 1:
        return np.sum(np.abs(x))
    return np.sum(np.abs(x) ** x.dtype.type(ord)) ** x.dtype.type(1 / ord)


def clip_grad_norm_(params, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale every gradient in place so their joint norm is at most ``max_norm``; return the norm before.

    As ``torch.nn.utils.clip_grad_norm_``: ``total = vector_norm([vector_norm(g) for g in grads])``
    with the ``norm_type``-norm, then every gradient is multiplied by
    ``clip_coef = min(max_norm / (total + 1e-6), 1)`` (a multiplication even when the coefficient is 1,
    as torch). Parameters without a gradient are skipped.

    Parameters
    ----------
    params : Parameter or iterable of Parameter
    max_norm : float
        ``>= 0``; ``inf`` leaves the gradients unchanged (the coefficient is 1).
    norm_type : float or ``"inf"``, default 2.0
        Any p of ``torch.linalg.vector_norm``: a real number, ``float("inf")``, ``"inf"``, ``-inf``, 0.
    error_if_nonfinite : bool, default False
        Raise RuntimeError (before changing any gradient) when the total norm is NaN or infinite.
        Otherwise, as torch, clip anyway: a NaN norm makes every gradient NaN, an infinite one scales
        them by 0 (so infinite entries become NaN).
    foreach : None or bool
        torch's switch between its code paths; ours is one path (the numbers torch gets either way).

    Returns
    -------
    ndarray (0-d)
        The total norm, in the gradients' dtype; ``0.0`` as float32 when no parameter has a gradient
        (torch's ``torch.tensor(0.0)``).
    """
    if isinstance(params, Parameter):
        params = [params]
    if isinstance(params, (Module, str, bytes, dict)) or not hasattr(params, "__iter__"):
        raise TypeError(f"params must be an iterable of Parameters (e.g. model.parameters()), got "
                        f"{type(params).__name__}")
    params = list(params)
    bad = [type(p).__name__ for p in params if not isinstance(p, Parameter)]
    if bad:
        raise TypeError(f"params must be nt.Parameter objects, got {bad[0]}")
    max_norm = check_number(max_norm, "max_norm", low=0, allow_inf=True)
    if isinstance(norm_type, str):
        try:
            norm_type = float(norm_type)            # torch: float(norm_type), so "inf" and "2" work
        except ValueError:
            raise ValueError(f"norm_type must be a number or 'inf', got {norm_type!r}") from None
    norm_type = check_number(norm_type, "norm_type", allow_inf=True)
    if foreach not in (None, False, True):
        raise ValueError(f"foreach must be None, False or True, got {foreach!r}")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return np.asarray(0.0, dtype=np.float32)
    norms = np.stack([vector_norm(g, norm_type) for g in grads])
    if norm_type == 2:
        total = np.sqrt(np.sum(np.square(norms)))                  # the norm of the norms
    else:
        total = vector_norm(norms, norm_type)
    total = np.asarray(total)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite "
                           f"({float(total)}), so it cannot be clipped. To disable this error and scale the "
                           "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    dt = total.dtype
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        coef = np.minimum(dt.type(max_norm) / (total + dt.type(1e-6)), dt.type(1.0))
        for g in grads:
            g *= coef.astype(g.dtype)
    return total
