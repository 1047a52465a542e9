"""Optimizers, learning-rate schedules and gradient clipping with ``torch.optim``'s exact update rules.

Every rule below is written out in the order torch (2.x, single-tensor CPU path) evaluates it, so a
float64 run matches torch's to rounding. Optimizers hold ``param_groups`` (a list of dicts with
``"params"`` and the hyper-parameters, as torch) and a per-parameter ``state``; ``state_dict()`` has
torch's layout ``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``.

* ``SGD``: ``g = grad + wd * p``; with momentum ``b = g`` on the first step, afterwards
  ``b = momentum * b + (1 - dampening) * g``; ``g = g + momentum * b`` (Nesterov) or ``g = b``;
  ``p -= lr * g``.
* ``Adam``: ``g = grad + wd * p``; ``m = lerp(m, g, 1 - beta1)``; ``v = beta2 * v + (1 - beta2) g^2``;
  ``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.
* ``AdamW``: ``p *= 1 - lr * wd`` first (decoupled decay), then Adam without the ``wd * p`` term.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import FLOAT_DTYPES, check_number, check_positive_int
from .nn import Module, Parameter

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm_", "noam_lr", "WarmupInverseSqrtSchedule",
           "ConstantSchedule", "OPTIMIZERS", "make_optimizer"]


class Optimizer:
    """Base class: parameter groups, ``zero_grad``, ``state_dict``/``load_state_dict``."""

    defaults: dict = {}

    def __init__(self, params, defaults):
        if isinstance(params, (Parameter, Module)) or not hasattr(params, "__iter__"):
            raise TypeError("params must be an iterable of Parameters (e.g. model.parameters()), "
                            f"got {'a single ' if isinstance(params, Parameter) else ''}{type(params).__name__}")
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        seen = set()
        for g in groups:
            if not isinstance(g, dict) or "params" not in g:
                raise TypeError("a parameter group must be a dict with a 'params' entry, got "
                                f"{type(g).__name__}")
            g = dict(g)
            plist = [g["params"]] if isinstance(g["params"], Parameter) else list(g["params"])
            for p in plist:
                if not isinstance(p, Parameter):
                    raise TypeError(f"optimizer params must be nt.Parameter objects, got {type(p).__name__}")
                if p.data.dtype not in FLOAT_DTYPES:
                    raise TypeError(f"optimizer params must be float32 or float64 arrays, got a Parameter of dtype "
                                    f"{p.data.dtype} and shape {p.data.shape}")
                if id(p) in seen:
                    raise ValueError("a parameter appears in more than one parameter group")
                seen.add(id(p))
            g["params"] = plist
            for k, v in self.defaults.items():
                g.setdefault(k, v)
            self._check_group(g)
            self.param_groups.append(g)

    def _check_group(self, group):
        """Validate (and normalise to floats) a group's hyper-parameters; ValueError names the bad one."""
        group["lr"] = check_number(group["lr"], "lr", low=0)
        group["weight_decay"] = check_number(group.get("weight_decay", 0.0), "weight_decay", low=0)

    @property
    def lr(self):
        return self.param_groups[0]["lr"]

    def set_lr(self, lr):
        lr = check_number(lr, "lr", low=0)
        for g in self.param_groups:
            g["lr"] = lr

    def params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none=True):
        """Forget every gradient (``None``, as torch's default) or fill it with zeros."""
        for p in self.params():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad[...] = 0

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.shape != p.data.shape:
                    raise ValueError(f"gradient shape {p.grad.shape} differs from parameter shape {p.data.shape}")
                if p.grad.dtype != p.data.dtype:
                    raise TypeError(f"gradient dtype {p.grad.dtype} differs from the parameter's {p.data.dtype} "
                                    f"(shape {p.data.shape}); gradients must have their parameter's dtype")
                self._update(p, p.grad, self.state.setdefault(id(p), {}), group)

    def _update(self, p, grad, state, group):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self):
        """``{"state": {i: {name: array or number}}, "param_groups": [...]}`` with parameters as indices
        (their order in ``param_groups``), torch's layout. Arrays are copies."""
        index = {id(p): i for i, p in enumerate(self.params())}
        state = {}
        for p in self.params():
            s = self.state.get(id(p))
            if s:
                state[index[id(p)]] = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
        groups = []
        for g in self.param_groups:
            d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items() if k != "params"}
            d["params"] = [index[id(p)] for p in g["params"]]
            groups.append(d)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyper-parameters and per-parameter state; everything is validated first, so a refused
        state leaves the optimizer as it was."""
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise ValueError(f"optimizer state_dict must be a dict with keys 'state' and 'param_groups' "
                             f"(as state_dict() returns), got {got}")
        groups = state_dict["param_groups"]
        if not isinstance(groups, (list, tuple)) or not all(isinstance(g, dict) and "params" in g for g in groups):
            raise ValueError("optimizer state's param_groups must be a list of dicts with a 'params' entry")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"optimizer state has {len(groups)} parameter groups, this optimizer has "
                             f"{len(self.param_groups)}")
        params = self.params()
        for g_new, g in zip(groups, self.param_groups):
            if len(g_new["params"]) != len(g["params"]):
                raise ValueError("optimizer state's parameter groups have different sizes from this optimizer's")
        new_state = {}
        for key, s in state_dict["state"].items():
            i = int(key)
            if not 0 <= i < len(params):
                raise ValueError(f"optimizer state refers to parameter {i}, but there are {len(params)}")
            p = params[i]
            converted = {}
            for name, v in s.items():
                if isinstance(v, np.ndarray) and v.ndim > 0:
                    if v.shape != p.data.shape:
                        raise ValueError(f"optimizer state {name!r} of parameter {i} has shape {v.shape}, "
                                         f"the parameter has {p.data.shape}")
                    v = v.astype(p.data.dtype, copy=True)
                elif isinstance(v, np.ndarray):
                    v = v.item()
                converted[name] = v
            new_state[id(p)] = converted
        new_groups = []
        for g_new, g in zip(groups, self.param_groups):
            unknown = sorted(set(g_new) - set(g))
            if unknown:
                raise ValueError(f"optimizer state's param_groups hold unknown settings {unknown} "
                                 f"(state from another optimizer class?)")
            merged = dict(g)
            merged.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in g_new.items() if k != "params"})
            self._check_group(merged)
            new_groups.append(merged)
        for g, merged in zip(self.param_groups, new_groups):
            g.update(merged)
        self.state = new_state

    def __repr__(self):
        hp = ", ".join(f"{k}={v}" for k, v in self.param_groups[0].items() if k != "params")
        return f"{type(self).__name__}({hp})"


def _scalar(x, dtype):
    return np.dtype(dtype).type(x)


class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum and L2 weight decay, as torch."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        lr = check_number(lr, "lr", low=0)
        momentum = check_number(momentum, "momentum", low=0)
        dampening = check_number(dampening, "dampening")
        weight_decay = check_number(weight_decay, "weight_decay", low=0)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=bool(nesterov)))

    def _check_group(self, group):
        super()._check_group(group)
        group["momentum"] = check_number(group["momentum"], "momentum", low=0)
        group["dampening"] = check_number(group["dampening"], "dampening")

    def _update(self, p, grad, state, group):
        dt = p.data.dtype
        lr, wd, mom, damp = group["lr"], group["weight_decay"], group["momentum"], group["dampening"]
        d_p = grad
        if wd != 0:
            d_p = d_p + _scalar(wd, dt) * p.data
        if mom != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = np.array(d_p, copy=True)
            else:
                buf *= _scalar(mom, dt)
                buf += _scalar(1 - damp, dt) * d_p
            state["momentum_buffer"] = buf
            d_p = d_p + _scalar(mom, dt) * buf if group["nesterov"] else buf
        p.data -= _scalar(lr, dt) * d_p


class Adam(Optimizer):
    """Adam with bias correction (Kingma & Ba), L2 weight decay folded into the gradient, as torch."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _check_group(self, group):
        super()._check_group(group)
        betas = group["betas"]
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        group["betas"] = tuple(check_number(b, f"betas[{i}]", low=0, high=1, high_open=True)
                               for i, b in enumerate(betas))
        group["eps"] = check_number(group["eps"], "eps", low=0)

    def _update(self, p, grad, state, group):
        dt = p.data.dtype
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0.0
            state["exp_avg"] = np.zeros_like(p.data)
            state["exp_avg_sq"] = np.zeros_like(p.data)
        state["step"] += 1.0
        step = state["step"]
        if wd != 0:
            if self.decoupled:
                p.data *= _scalar(1 - lr * wd, dt)
            else:
                grad = grad + _scalar(wd, dt) * p.data
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += _scalar(1 - beta1, dt) * (grad - m)                   # torch's lerp(m, grad, 1 - beta1)
        v *= _scalar(beta2, dt)
        v += _scalar(1 - beta2, dt) * grad * grad
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        denom = np.sqrt(v) / _scalar(math.sqrt(bias_correction2), dt) + _scalar(eps, dt)
        p.data -= _scalar(step_size, dt) * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` before the Adam step."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


OPTIMIZERS = {"sgd": SGD, "adam": Adam, "adamw": AdamW}


def make_optimizer(name, params, **kwargs):
    """``OPTIMIZERS[name](params, **kwargs)`` with a clear error for an unknown name."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {name!r}")
    return OPTIMIZERS[name](params, **kwargs)


# --------------------------------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------------------------------

def clip_grad_norm_(params, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale every gradient in place so their joint norm is at most ``max_norm``; return the norm before.

    As ``torch.nn.utils.clip_grad_norm_``: ``total = norm([norm(g) for g in grads])``, then every
    gradient is multiplied by ``min(max_norm / (total + 1e-6), 1)``. Parameters without a gradient are
    skipped. Returns a 0-d array (the total norm; 0 when no parameter has a gradient).
    """
    if isinstance(params, Parameter):
        params = [params]
    if isinstance(params, Module) or not hasattr(params, "__iter__"):
        raise TypeError(f"params must be an iterable of Parameters (e.g. model.parameters()), got "
                        f"{type(params).__name__}")
    params = list(params)
    bad = [type(p).__name__ for p in params if not isinstance(p, Parameter)]
    if bad:
        raise TypeError(f"params must be nt.Parameter objects, got {bad[0]}")
    max_norm = check_number(max_norm, "max_norm", low=0, allow_inf=True)
    norm_type = check_number(norm_type, "norm_type", allow_inf=True)
    if norm_type not in (2.0, math.inf):
        raise ValueError(f"norm_type must be 2 or inf, got {norm_type!r}")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return np.asarray(0.0)
    dt = grads[0].dtype
    if norm_type == math.inf:
        norms = [np.max(np.abs(g)) if g.size else dt.type(0) for g in grads]
        total = np.max(np.stack(norms))
    elif norm_type == 2.0:
        norms = [np.sqrt(np.dot(g.ravel(), g.ravel())) for g in grads]
        total = np.sqrt(np.sum(np.square(np.stack(norms))))
    else:
        raise ValueError(f"norm_type must be 2 or inf, got {norm_type!r}")
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"the total norm of the gradients is {total}; set error_if_nonfinite=False to clip anyway")
    coef = np.minimum(dt.type(max_norm) / (total + dt.type(1e-6)), dt.type(1.0))
    for g in grads:
        g *= coef
    return np.asarray(total)


# --------------------------------------------------------------------------------------------------
# learning-rate schedules
# --------------------------------------------------------------------------------------------------

def noam_lr(step, d_model, warmup, factor=1.0):
    """The paper's schedule ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (step >= 1):
    a linear warm-up for ``warmup`` steps, then decay as ``1/sqrt(step)``; the peak, at ``step = warmup``,
    is ``factor / sqrt(d_model * warmup)``."""
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"step counts from 1, got {step!r}")
    check_positive_int(d_model, "d_model")
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 1:
        raise ValueError(f"warmup must be an int >= 1, got {warmup!r}")
    check_number(factor, "factor")
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


class WarmupInverseSqrtSchedule:
    """The paper's warm-up schedule as a callable ``step -> lr`` (see :func:`noam_lr`)."""

    def __init__(self, d_model, warmup=4000, factor=1.0):
        noam_lr(1, d_model, warmup, factor)                  # validates the three arguments
        self.d_model, self.warmup, self.factor = d_model, warmup, factor

    def __call__(self, step):
        return noam_lr(step, self.d_model, self.warmup, self.factor)

    @property
    def peak(self):
        return self(self.warmup)

    def __repr__(self):
        return f"WarmupInverseSqrtSchedule(d_model={self.d_model}, warmup={self.warmup}, factor={self.factor})"


class ConstantSchedule:
    """``step -> lr`` always the same."""

    def __init__(self, lr):
        self.lr = check_number(lr, "lr", low=0)

    def __call__(self, step):
        return self.lr

    peak = property(lambda self: self.lr)

    def __repr__(self):
        return f"ConstantSchedule(lr={self.lr})"
