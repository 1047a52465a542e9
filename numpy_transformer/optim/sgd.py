"""Stochastic gradient descent, as ``torch.optim.SGD`` (its single-tensor CPU update, in its order).

With ``g = -grad`` when ``maximize`` else ``grad``::

    g = g + weight_decay * p                                  # when weight_decay != 0
    b = g (first step)  or  b = momentum * b + (1 - dampening) * g   # when momentum != 0
    g = g + momentum * b (nesterov)  or  g = b
    p = p - lr * g
"""

from __future__ import annotations

import numpy as np

from ..functional.dtypes import as_scalar
from ..utils.checks import check_number
from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum and L2 weight decay, as torch.

    Parameters
    ----------
    params : iterable of Parameter or of dicts (parameter groups)
    lr : float, default 1e-3
        torch 2.x's default.
    momentum, dampening, weight_decay : float, default 0
    nesterov : bool, default False
        Needs ``momentum > 0`` and ``dampening == 0``.
    maximize : bool, default False
        Ascend: step along ``+grad``.
    foreach, differentiable, fused
        torch's switches between its code paths, accepted so that its arguments and state dicts carry
        over: ``foreach`` any value (torch's numbers are the same either way on CPU), ``differentiable``
        only False, ``fused`` only None/False (ValueError otherwise).

    State per parameter: ``"momentum_buffer"`` (when momentum != 0), torch's name.
    """

    state_keys = ("momentum_buffer",)

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        lr = check_number(lr, "lr", low=0)
        momentum = check_number(momentum, "momentum", low=0)
        dampening = check_number(dampening, "dampening")
        weight_decay = check_number(weight_decay, "weight_decay", low=0)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening "
                             f"(got momentum={momentum!r}, dampening={dampening!r})")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _check_group(self, group):
        super()._check_group(group)
        group["momentum"] = check_number(group["momentum"], "momentum", low=0)
        group["dampening"] = check_number(group["dampening"], "dampening")
        group["nesterov"] = self._check_bool(group["nesterov"], "nesterov")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening "
                             f"(got momentum={group['momentum']!r}, dampening={group['dampening']!r})")

    def _update(self, p, grad, state, group):
        dt = p.data.dtype
        lr, wd, mom, damp = group["lr"], group["weight_decay"], group["momentum"], group["dampening"]
        d_p = -grad if group["maximize"] else grad
        if wd != 0:
            d_p = d_p + as_scalar(wd, dt) * p.data
        if mom != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = np.array(d_p, copy=True)
            else:
                buf *= as_scalar(mom, dt)
                buf += as_scalar(1 - damp, dt) * d_p
            state["momentum_buffer"] = buf
            d_p = d_p + as_scalar(mom, dt) * buf if group["nesterov"] else buf
        p.data -= as_scalar(lr, dt) * d_p
