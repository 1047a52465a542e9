"""Cross-entropy, exactly as ``torch.nn.functional.cross_entropy``: ``cross_entropy_forward/backward``.

Shapes (torch's layout: the class axis is dim 1): ``input`` (C,), (N, C) or (N, C, d1, ..., dk);
``target`` either class indices of shape (), (N,) or (N, d1, ..., dk) (any integer dtype), or class
probabilities, a float array of the input's own shape. Internally every position becomes one row of
an (M, C) matrix (the class axis moved last, M = N * d1 * ... * dk), so each row is one softmax.

Model logits of shape (B, S, V) have the class axis *last*: pass ``logits.reshape(-1, V)`` with
``target.reshape(-1)``, or ``logits.transpose(0, 2, 1)`` (B, V, S) with a (B, S) target, as in torch.
Passed as they are, (B, S, V) logits are read as N=B, C=S, d1=V: an error when the target's shape
does not fit, and silently the wrong loss when S == V (torch behaves the same).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..utils.checks import FLOAT_DTYPES, check_number

__all__ = ["CrossEntropyCache", "cross_entropy_forward", "cross_entropy_backward", "log_softmax"]

REDUCTIONS = ("mean", "sum", "none")


def log_softmax(z, axis=-1):
    """``z - logsumexp(z)`` along ``axis``, stable for any finite input (the max is subtracted first)."""
    m = np.max(z, axis=axis, keepdims=True)
    with np.errstate(over="ignore"):                   # a spread beyond the dtype's range: -inf, exp -> 0
        shifted = z - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


class CrossEntropyCache(NamedTuple):
    logp: np.ndarray                 # (M, C) log-softmax, one row per position
    target: np.ndarray               # index targets: (M,) class ids (0 where ignored); probabilities: (M, C) q
    keep: Optional[np.ndarray]       # (M,) bool, False where the target is ignore_index (index targets only)
    target_weight: Optional[np.ndarray]  # (M,) weight[target] (index targets with a weight only)
    weight: Optional[np.ndarray]     # (C,) in the input's dtype, or None
    label_smoothing: float
    reduction: str
    denom: float                     # what "mean" divides by: kept count, kept weight sum or M
    input_shape: tuple
    out_shape: tuple                 # the shape of the "none" output


def _rows(x):
    """(C,), (N, C) or (N, C, d1, ...) -> (M, C), the class axis last."""
    if x.ndim == 1:
        return x[None, :]
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(g, shape):
    """(M, C) -> ``shape`` with the class axis back at dim 1 (the inverse of :func:`_rows`)."""
    if len(shape) == 1:
        return g[0]
    if len(shape) == 2:
        return g
    return np.ascontiguousarray(np.moveaxis(g.reshape((shape[0],) + shape[2:] + (shape[1],)), -1, 1))


def _check(input, target, weight, ignore_index, reduction, label_smoothing):
    """Validated ``(input, target, weight, probabilities?)``; every error names the argument."""
    x = input if isinstance(input, np.ndarray) else np.asarray(input)
    t = target if isinstance(target, np.ndarray) else np.asarray(target)
    if x.dtype not in FLOAT_DTYPES:
        hint = (" (float16 is not supported: convert with input.astype(np.float32); in mixed precision the loss "
                "is computed in float32 on numpy_transformer.amp.MixedPrecision's float32 logits)"
                if x.dtype == np.float16
                else "")
        raise TypeError(f"input must be float32 or float64 logits, got dtype {x.dtype}{hint}")
    if x.ndim == 0:
        raise ValueError("input must have shape (C,), (N, C) or (N, C, d1, ...) (class axis at dim 1), "
                         "got a 0-d array")
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    if c == 0:
        raise ValueError(f"input must have at least one class (C = input.shape[{min(x.ndim - 1, 1)}] >= 1), "
                         f"got shape {x.shape}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    check_number(label_smoothing, "label_smoothing", 0.0, 1.0)
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"ignore_index must be an int, got {ignore_index!r}")
    if weight is not None:
        w = weight if isinstance(weight, np.ndarray) else np.asarray(weight)
        if w.dtype.kind not in "fiu":
            raise TypeError(f"weight must be a float array of per-class weights, got dtype {w.dtype}")
        if w.shape != (c,):
            raise ValueError(f"weight must have shape ({c},): one weight per class of input {x.shape}, "
                             f"got shape {w.shape}")
        weight = w.astype(x.dtype, copy=False)
    index_shape = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if t.shape == x.shape:                          # torch's rule: the input's shape means probabilities
        if t.dtype.kind != "f":
            raise TypeError(f"target has the input's shape {x.shape}, so it is read as class probabilities, "
                            f"which must be floating point; got dtype {t.dtype} (class indices have shape "
                            f"{index_shape})")
        if ignore_index != -100:
            raise ValueError(f"ignore_index={ignore_index} is not supported with probability targets "
                             "(float targets of the input's shape); torch refuses it too")
        return x, t.astype(x.dtype, copy=False), weight, True
    if t.dtype.kind not in "iu":
        raise TypeError(f"target must be integer class indices of shape {index_shape} or float class "
                        f"probabilities of the input's shape {x.shape}; got dtype {t.dtype} with shape {t.shape}")
    if t.shape != index_shape:
        hint = ""
        if x.ndim == 3 and t.shape == x.shape[:2]:
            hint = (f"; the class axis is dim 1, as in torch: (B, S, V) logits go in as "
                    f"input.reshape(-1, {x.shape[2]}) with target.reshape(-1), or input.transpose(0, 2, 1)")
        raise ValueError(f"target must have shape {index_shape} to match input {x.shape} (class axis at dim 1), "
                         f"got {t.shape}{hint}")
    t = t.astype(np.int64, copy=False)
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    if bad.any():
        raise IndexError(f"target must hold class indices in [0, {c}) or ignore_index={ignore_index}, "
                         f"got {int(t[bad].flat[0])} ({int(bad.sum())} such entr{'y' if bad.sum() == 1 else 'ies'})")
    return x, t, weight, False


def cross_entropy_forward(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of ``input`` logits against ``target``, as ``torch.nn.functional.cross_entropy``.

    Parameters
    ----------
    input : ndarray (C,), (N, C) or (N, C, d1, ..., dk), float32 or float64
        Logits; the class axis is dim 1 (dim 0 for a single unbatched (C,) row).
    target : ndarray
        Class indices (any integer dtype) of shape (), (N,) or (N, d1, ..., dk), each in [0, C) or
        equal to ``ignore_index`` (torch takes int64 or uint8 only); or class probabilities, a float
        array of the input's shape, cast to the input's dtype (not checked to sum to 1, as torch).
    weight : ndarray (C,), optional
        Per-class weights, cast to the input's dtype (torch refuses another dtype).
    ignore_index : int
        An index target equal to it costs nothing and gets no gradient (default -100; it may be a real
        class id). Probability targets refuse any other value than -100, as torch.
    reduction : {"mean", "sum", "none"}
    label_smoothing : float in [0, 1]
        Mixes the target with the uniform distribution: ``q = (1 - e) * target + e / C``. torch
        silently treats a negative value as 0; it is refused here.

    Returns
    -------
    out : ndarray
        A 0-d array (``"mean"``/``"sum"``) or, for ``"none"``, one loss per position: shape (),
        (N,) or (N, d1, ..., dk). Same dtype as ``input``.
    cache : CrossEntropyCache

    Notes
    -----
    With ``logp = log_softmax(input)`` along the class axis and a position's weighted target
    distribution ``q`` (index target y: ``q_c = (1 - e) w_y [c = y] + (e / C) w_c``; probability
    target t: ``q_c = w_c ((1 - e) t_c + e / C)``; ``w = 1`` without a weight), the position costs
    ``l = -sum_c q_c logp_c`` (0 where ignored). ``"sum"`` adds the l; ``"mean"`` divides that sum by
    the sum of ``w_y`` over the positions not ignored (index targets: the count of kept positions
    without a weight) or by the number of positions M (probability targets, whatever the weight).
    A zero divisor gives NaN: every target ignored (or an empty batch), or kept targets of weight 0
    (negative weights that cancel exactly give NaN here, where torch may give +-inf).
    """
    x, t, w, probs = _check(input, target, weight, ignore_index, reduction, label_smoothing)
    dt = x.dtype
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    out_shape = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    e = float(label_smoothing)
    logp = log_softmax(_rows(x), axis=-1)                                         # (M, C)
    m = logp.shape[0]
    keep = wy = None
    if probs:
        q = _rows(t)                                                              # (M, C)
        if e > 0:
            q = q * dt.type(1 - e) + dt.type(e / c)
        if w is not None:
            q = q * w                                                             # (M, C)
        per_row = -(q * logp).sum(axis=1)                                         # (M,)
        denom, saved = m, q
    else:
        t = t.reshape(-1)                                                         # (M,)
        keep = t != ignore_index                                                  # (M,)
        saved = np.where(keep, t, 0)
        nll = -np.take_along_axis(logp, saved[:, None], axis=1)[:, 0]             # (M,) -log p_y
        if w is not None:
            wy = w[saved]                                                         # (M,) w_y
            nll = wy * nll
        if e > 0:
            smooth = -logp.sum(axis=1) if w is None else -(logp @ w)              # (M,) -sum_c w_c log p_c
            per_row = dt.type(1 - e) * nll + dt.type(e / c) * smooth
        else:
            per_row = nll
        per_row = np.where(keep, per_row, dt.type(0))                             # (M,)
        denom = int(keep.sum()) if w is None else float(np.where(keep, wy, dt.type(0)).sum())
    if reduction == "none":
        out = per_row.reshape(out_shape)
    elif reduction == "sum":
        out = per_row.sum()
    else:
        out = per_row.sum() / dt.type(denom) if denom != 0 else dt.type(np.nan)
    cache = CrossEntropyCache(logp, saved, keep, wy, w, e, reduction, denom, x.shape, out_shape)
    return np.asarray(out, dtype=dt), cache


def cross_entropy_backward(dout, cache):
    """Gradient of :func:`cross_entropy_forward` with respect to ``input`` (its shape and dtype).

    Parameters
    ----------
    dout : number or ndarray
        The upstream gradient: a scalar for ``"mean"``/``"sum"``, an array of the output's shape for
        ``"none"``.
    cache : CrossEntropyCache

    Returns
    -------
    dinput : ndarray, the input's shape. No gradient is returned for probability targets (torch's
    autograd has one, ``-omega (1 - e) w_c logp_c``; here targets are data).

    Notes
    -----
    The forward computed, per position (one row z of logits), ``l = -sum_c q_c logp_c`` with
    ``logp_c = z_c - log sum_j exp(z_j)`` and the weighted target distribution q of
    :func:`cross_entropy_forward`. Since ``d logp_c / d z_k = [c = k] - p_k`` (``p = softmax(z)``)::

        dl/dz_k = -sum_c q_c ([c = k] - p_k) = p_k Q - q_k,      Q = sum_c q_c

    Q is 1 for an unweighted index or a normalised probability target (then ``p - q``), but not with a
    weight: index targets have ``Q = (1 - e) w_y + (e / C) sum_c w_c``, and the code evaluates
    ``p Q - q = (1 - e) w_y (p - onehot(y)) + (e / C) (p sum(w) - w)``: ``p_y - 1`` is exact even when
    huge logits put ``p_y`` within rounding of 1 (``p_y w_y - w_y`` would lose those digits). The reduction scales each
    row by ``omega``: the upstream gradient (``"sum"``), divided by the forward's divisor
    (``"mean"``), or the row's own entry of ``dout`` (``"none"``); ignored rows get ``omega = 0``. A
    zero divisor (the loss was NaN) gives NaN on the rows not ignored, as torch; all ignored gives 0.
    """
    logp, target, keep = cache.logp, cache.target, cache.keep
    w, e, reduction = cache.weight, cache.label_smoothing, cache.reduction         # the w and e above
    dt = logp.dtype
    m, c = logp.shape
    up = np.asarray(dout)
    if up.dtype.kind not in "fiu":
        raise TypeError(f"dout must be a number or a float array, got dtype {up.dtype}")
    if reduction == "none":
        if up.shape != tuple(cache.out_shape):
            raise ValueError(f"dout must have the output's shape {tuple(cache.out_shape)} for reduction='none', "
                             f"got {up.shape}")
        omega = up.astype(dt).reshape(-1)                                         # (M,)
    else:
        if up.ndim != 0:
            raise ValueError(f"dout must be a scalar for reduction={reduction!r}, got shape {up.shape}")
        omega = np.full(m, up.astype(dt), dtype=dt)                               # (M,)
        if reduction == "mean":
            omega = omega / dt.type(cache.denom) if cache.denom != 0 else np.full(m, dt.type(np.nan))
    grad = np.exp(logp)                                                           # (M, C) softmax p
    if keep is None:                                                              # probability targets
        grad *= target.sum(axis=1, keepdims=True)                                 # (M, C) p Q
        grad -= target                                                            # (M, C) p Q - q
    else:
        rows = np.arange(m)
        if w is None:                                                             # Q = 1
            grad[rows, target] -= dt.type(1 - e)
            if e > 0:
                grad -= dt.type(e / c)
        else:                                     # p Q - q = (1 - e) w_y (p - onehot) + (e / C)(p sum(w) - w)
            smooth = (grad * w.sum() - w) * dt.type(e / c) if e > 0 else None     # (M, C)
            grad[rows, target] -= dt.type(1)                                      # p - onehot, exact near p_y = 1
            wy = cache.target_weight                                              # (M,) w_y = weight[target]
            grad *= (dt.type(1 - e) * wy)[:, None]                                # (M, C)
            if smooth is not None:
                grad += smooth                                                    # (M, C) p Q - q
        omega = np.where(keep, omega, dt.type(0))                                 # (M,)
    grad *= omega[:, None]
    return _unrows(grad, tuple(cache.input_shape))
