"""Adam and AdamW, as ``torch.optim.Adam`` / ``torch.optim.AdamW`` (single-tensor CPU update, in its order).

With ``g = -grad`` when ``maximize`` else ``grad`` and ``t`` the step count (from 1)::

    p = p * (1 - lr * wd)        (decoupled: AdamW)   or   g = g + wd * p   (Adam's L2)
    m = lerp(m, g, 1 - beta1)                          # m + (1 - beta1) (g - m)
    v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v)                              # amsgrad: normalise by the largest v so far
    p = p - lr / (1 - beta1^t) * m / (sqrt(v or v_max) / sqrt(1 - beta2^t) + eps)
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..functional.dtypes import as_scalar
from ..kernels.parallel import map_chunks
from ..utils.checks import check_number
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


def _lerp_(start, end, weight):
    """``start += weight * (end - start)`` in place, with torch's two formulas: for ``|weight| >= 0.5``
    torch computes ``end - (end - start) * (1 - weight)`` (better rounding near ``end``)."""
    dt = start.dtype
    if abs(weight) < 0.5:
        start += as_scalar(weight, dt) * (end - start)
    else:
        diff = end - start
        diff *= as_scalar(1 - weight, dt)
        np.subtract(end, diff, out=start)


class Adam(Optimizer):
    """Adam with bias correction (Kingma & Ba), L2 weight decay folded into the gradient, as torch.

    Parameters
    ----------
    params : iterable of Parameter or of dicts (parameter groups)
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
        Decay rates of the first and second moment averages, each in [0, 1).
    eps : float, default 1e-8
        Added to ``sqrt(v_hat)`` in the denominator.
    weight_decay : float, default 0
        L2 penalty added to the gradient (AdamW: decoupled decay of the weights).
    amsgrad : bool, default False
        Normalise by the running maximum of ``v`` (state ``"max_exp_avg_sq"``), Reddi et al.
    maximize : bool, default False
        Ascend: step along ``+grad``.
    decoupled_weight_decay : bool, default False
        True makes this optimizer AdamW (torch 2.x's switch).
    foreach, capturable, differentiable, fused
        torch's switches between its code paths, accepted so that its arguments and state dicts carry
        over: ``foreach`` any value (torch's numbers are the same either way on CPU), the others only
        at the value that selects torch's plain path (``capturable=False``, ``differentiable=False``,
        ``fused=None/False``; ValueError otherwise).

    State per parameter, torch's names: ``"step"`` (a float; torch keeps a 0-d float32 tensor),
    ``"exp_avg"``, ``"exp_avg_sq"``, and ``"max_exp_avg_sq"`` with ``amsgrad``.
    """

    state_keys = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check_group(self, group):
        super()._check_group(group)
        betas = group["betas"]
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        group["betas"] = tuple(check_number(b.item() if isinstance(b, np.ndarray) else b, f"betas[{i}]",
                                            low=0, high=1, high_open=True) for i, b in enumerate(betas))
        group["eps"] = check_number(group["eps"], "eps", low=0)
        group["amsgrad"] = self._check_bool(group["amsgrad"], "amsgrad")
        group["decoupled_weight_decay"] = self._check_bool(group["decoupled_weight_decay"], "decoupled_weight_decay")

    def _check_state(self, state, groups):
        for g in groups:
            for p in g["params"]:
                s = state.get(id(p))
                if not s:
                    continue
                need = {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if g["amsgrad"] else set())
                missing = sorted(need - set(k for k, v in s.items() if v is not None))
                if missing:
                    raise ValueError(f"optimizer state of a parameter of shape {p.data.shape} lacks {missing}"
                                     + (" (amsgrad=True needs max_exp_avg_sq)" if "max_exp_avg_sq" in missing else ""))

    def _update(self, p, grad, state, group):
        dt = p.data.dtype
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0.0
            state["exp_avg"] = np.zeros_like(p.data)
            state["exp_avg_sq"] = np.zeros_like(p.data)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(p.data)
        state["step"] += 1.0
        step = state["step"]
        if group["maximize"]:
            grad = -grad
        if wd != 0 and not group["decoupled_weight_decay"]:
            grad = grad + as_scalar(wd, dt) * p.data              # Adam's L2 (AdamW decays in the step)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        kernel = partial(_adam_step, beta1=beta1, beta2=beta2, eps=eps, step_size=step_size,
                         bias_correction2_sqrt=math.sqrt(bias_correction2),
                         decay=1 - lr * wd if wd != 0 and group["decoupled_weight_decay"] else None)
        moments = [state["exp_avg"], state["exp_avg_sq"]] + ([state["max_exp_avg_sq"]] if group["amsgrad"] else [])
        if all(a.flags.c_contiguous for a in [p.data, *moments]):
            # The same elementwise steps on cache-sized chunks (on the thread pool): each element gets
            # exactly the operations of the whole-array call, bit for bit, but a step reads and writes
            # p, m and v once from memory instead of once per operation (13M parameters: 53 MB each).
            map_chunks(kernel, p.data, np.ascontiguousarray(grad), *moments)
        else:
            kernel(p.data, grad, *moments)


def _adam_step(p, grad, m, v, v_max=None, *, beta1, beta2, eps, step_size, bias_correction2_sqrt, decay):
    """One Adam step in place on ``p``, ``m``, ``v`` (and ``v_max`` with amsgrad), in torch's order."""
    dt = p.dtype
    if decay is not None:
        p *= as_scalar(decay, dt)                                 # AdamW: decoupled decay first
    _lerp_(m, grad, 1 - beta1)
    v *= as_scalar(beta2, dt)
    v += as_scalar(1 - beta2, dt) * grad * grad
    if v_max is not None:
        np.maximum(v_max, v, out=v_max)
        v = v_max
    denom = np.sqrt(v) / as_scalar(bias_correction2_sqrt, dt) + as_scalar(eps, dt)
    p -= as_scalar(step_size, dt) * (m / denom)                   # torch: addcdiv_(m, denom, value=-step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` before the Adam step.

    ``Adam(..., decoupled_weight_decay=True)`` with torch's AdamW defaults (``weight_decay=1e-2``);
    the setting stays True whatever a loaded state dict says, as torch.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def _check_group(self, group):
        group["decoupled_weight_decay"] = True
        super()._check_group(group)
