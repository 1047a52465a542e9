"""The optimizer base class: parameter groups, ``zero_grad``, ``step``, ``state_dict``/``load_state_dict``.

As ``torch.optim.Optimizer``: ``param_groups`` is a list of dicts, each with ``"params"`` (a list of
Parameters) and every hyper-parameter (missing ones filled in from the constructor's ``defaults``);
``state`` holds each parameter's buffers (keyed by ``id(p)``); ``state_dict()`` has torch's layout
``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` with parameters numbered
in their order through the groups, so a ``torch.optim`` state (as NumPy arrays, see
:meth:`Optimizer.load_state_dict`) loads here and ours loads into torch
(``reference_torch.convert.optimizer_state_to_torch``).
"""

from __future__ import annotations

import numpy as np

from ..nn import Module, Parameter
from ..utils.checks import FLOAT_DTYPES, check_number

__all__ = ["Optimizer"]

# Group keys torch.optim has for its other code paths. ``foreach`` (the multi-tensor loop) gives torch
# the very same numbers as its for-loop on CPU (tested), so any value is accepted; the others select
# paths we do not have and are accepted only at the value that selects the plain path.
PLAIN_PATH = {"differentiable": (False,), "fused": (None, False), "capturable": (False,)}


def _as_plain(value):
    """A state value as a Python number/bool/None or an ndarray (torch tensors via ``__array__``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_as_plain(v) for v in value)
    return np.asarray(value)


class Optimizer:
    """Base class of ``SGD``, ``Adam``, ``AdamW`` (``torch.optim.Optimizer``'s interface).

    Parameters
    ----------
    params : iterable of Parameter, of ``(name, Parameter)`` pairs, or of dicts
        ``model.parameters()``, ``model.named_parameters()`` (the names go to each group's
        ``"param_names"``, as torch) or parameter groups ``[{"params": [...], "lr": ...}, ...]``
        whose missing hyper-parameters come from ``defaults``.
    defaults : dict
        Every hyper-parameter of the optimizer with its value.

    A parameter may appear only once. torch refuses one in two groups (ValueError) but only warns
    about one listed twice in a group; we refuse both, because the duplicate would be updated twice.
    """

    # state entries this optimizer keeps per parameter (what load_state_dict accepts)
    state_keys: tuple = ()

    def __init__(self, params, defaults):
        if isinstance(params, (Parameter, Module)) or isinstance(params, (str, bytes, dict)) \
                or not hasattr(params, "__iter__"):
            raise TypeError("params must be an iterable of Parameters (e.g. model.parameters()), "
                            f"got {'a single ' if isinstance(params, Parameter) else ''}{type(params).__name__}")
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        for group in (params if isinstance(params[0], dict) else [{"params": params}]):
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Append a parameter group (a dict with ``"params"``; other settings default to ``defaults``).

        As torch: a Parameter alone stands for ``[p]``; a set is refused (its order changes between
        runs); ``(name, p)`` pairs record ``"param_names"``; a parameter already in a group raises
        ValueError. Everything is checked before the group is added, so a refused call changes nothing.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise TypeError(f"a parameter group must be a dict with a 'params' entry, got keys {sorted(param_group)}")
        group = dict(param_group)
        plist = group["params"]
        if isinstance(plist, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of parameters in sets changes between runs; use a list instead")
        plist = [plist] if isinstance(plist, Parameter) else list(plist)
        names = [p[0] for p in plist if isinstance(p, tuple)]
        if names:
            if len(names) != len(plist):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            group["param_names"] = names
            plist = [p[1] for p in plist]
        for p in plist:
            if not isinstance(p, Parameter):
                raise TypeError(f"optimizer params must be nt.Parameter objects, got {type(p).__name__}")
            if p.data.dtype not in FLOAT_DTYPES:
                raise TypeError(f"optimizer params must be float32 or float64 arrays, got a Parameter of dtype "
                                f"{p.data.dtype} and shape {p.data.shape}"
                                + ("; in mixed precision the optimizer holds the float32 master model's parameters "
                                   "(numpy_transformer.amp.MixedPrecision(model): optimize model.parameters())"
                                   if p.data.dtype == np.float16 else ""))
        if len({id(p) for p in plist}) != len(plist):
            raise ValueError("a parameter group lists the same parameter twice (torch only warns, and then updates "
                             "it twice per step); list each parameter once")
        for g in self.param_groups:
            if ("param_names" in g) != ("param_names" in group):
                raise ValueError("all optimizer param groups should be with/without names. cannot add param group "
                                 f"{'with' if 'param_names' in group else 'without'} names to the optimizer")
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in taken for p in plist):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = plist
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        unknown = sorted(set(group) - set(self.defaults) - {"params", "param_names", "initial_lr"})
        if unknown:
            raise ValueError(f"{type(self).__name__} has no setting {unknown[0]!r} (its settings: "
                             f"{', '.join(self.defaults)})")
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        """Validate (and normalise to floats) a group's hyper-parameters; ValueError names the bad one."""
        group["lr"] = check_number(group["lr"], "lr", low=0)
        group["weight_decay"] = check_number(group["weight_decay"], "weight_decay", low=0)
        for key, allowed in PLAIN_PATH.items():
            if key in group and group[key] not in allowed:
                raise ValueError(f"{key}={group[key]!r} is not supported: numpy_transformer implements torch's "
                                 f"plain single-tensor update ({key}={allowed[0]!r}), whose results a {key} path "
                                 "does not promise to reproduce")
        if group.get("foreach") not in (None, False, True):
            raise ValueError(f"foreach must be None, False or True, got {group['foreach']!r}")
        if "maximize" in group:
            group["maximize"] = self._check_bool(group["maximize"], "maximize")

    @staticmethod
    def _check_bool(value, name):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return bool(value)

    @property
    def lr(self):
        """The first group's learning rate."""
        return self.param_groups[0]["lr"]

    def set_lr(self, lr):
        """Set every group's learning rate (a scheduler does this for you)."""
        lr = check_number(lr, "lr", low=0)
        for g in self.param_groups:
            g["lr"] = lr

    def params(self):
        """Every parameter, in the order of ``state_dict()``'s indices."""
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none=True):
        """Forget every gradient (``None``, as torch's default) or fill it with zeros."""
        for p in self.params():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad[...] = 0

    def step(self, closure=None):
        """One update of every parameter that has a gradient; ``closure()`` (if given) runs first and its
        value is returned, as torch."""
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.shape != p.data.shape:
                    raise ValueError(f"gradient shape {p.grad.shape} differs from parameter shape {p.data.shape}")
                if p.grad.dtype != p.data.dtype:
                    raise TypeError(f"gradient dtype {p.grad.dtype} differs from the parameter's {p.data.dtype} "
                                    f"(shape {p.data.shape}); gradients must have their parameter's dtype")
        self._opt_called = True          # what a scheduler checks to warn about calling it first (as torch)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, p.grad, self.state.setdefault(id(p), {}), group)
        return loss

    def _update(self, p, grad, state, group):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self):
        """``{"state": {i: {name: array or number}}, "param_groups": [...]}`` with parameters as indices
        (their order in ``param_groups``), torch's layout. Arrays are copies (torch hands out its
        tensors themselves)."""
        index = {id(p): i for i, p in enumerate(self.params())}
        state = {}
        for p in self.params():
            s = self.state.get(id(p))
            if s:
                state[index[id(p)]] = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
        groups = []
        for g in self.param_groups:
            d = {k: (list(v) if k == "param_names" else v) for k, v in g.items() if k != "params"}
            d["params"] = [index[id(p)] for p in g["params"]]
            groups.append(d)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyper-parameters and per-parameter state of :meth:`state_dict` or of torch's optimizers.

        A ``torch.optim`` state dict loads as it is (its tensors are read through ``np.asarray``, so
        no torch import happens here) or after ``reference_torch.convert.optimizer_state_to_numpy``:
        ``"step"`` becomes a number, the buffers (``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq``,
        ``momentum_buffer``) arrays of their parameter's dtype, as torch casts them. torch's group keys
        for other code paths are accepted at values that change no result (``foreach``, ``fused=None``,
        ``differentiable=False``, ...), refused otherwise. An ``lr`` a scheduler rounded to just below 0
        (``> -1e-12``) is kept, as torch keeps it. Everything is validated first, so a refused state
        leaves the optimizer as it was.
        """
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
        for g_new, g in zip(groups, self.param_groups):
            if len(g_new["params"]) != len(g["params"]):
                raise ValueError("optimizer state's parameter groups have different sizes from this optimizer's")
        # torch matches saved indices to parameters by position through the groups
        id_map = {int(i): p for g_new, g in zip(groups, self.param_groups)
                  for i, p in zip(g_new["params"], g["params"])}
        new_state = {}
        for key, s in state_dict["state"].items():
            i = int(key)
            if i not in id_map:
                raise ValueError(f"optimizer state refers to parameter {i}, which is in none of its param_groups")
            p = id_map[i]
            if not isinstance(s, dict):
                raise ValueError(f"optimizer state of parameter {i} must be a dict, got {type(s).__name__}")
            unknown = sorted(set(s) - set(self.state_keys))
            if unknown:
                raise ValueError(f"optimizer state of parameter {i} holds {unknown}, which {type(self).__name__} "
                                 f"does not keep (it keeps {list(self.state_keys)}; "
                                 "state from another optimizer class?)")
            converted = {}
            for name, v in s.items():
                v = _as_plain(v)
                if name == "step":
                    v = check_number(v.item() if isinstance(v, np.ndarray) and v.size == 1 else v,
                                     f"optimizer state 'step' of parameter {i}", low=0)
                elif v is not None:
                    if not isinstance(v, np.ndarray) or v.shape != p.data.shape:
                        raise ValueError(f"optimizer state {name!r} of parameter {i} has shape "
                                         f"{getattr(v, 'shape', type(v).__name__)}, the parameter has {p.data.shape}")
                    v = v.astype(p.data.dtype, copy=True)
                converted[name] = v
            new_state[id(p)] = converted
        new_groups = []
        for g_new, g in zip(groups, self.param_groups):
            unknown = sorted(set(g_new) - set(g) - {"initial_lr", "param_names"})
            if unknown:
                raise ValueError(f"optimizer state's param_groups hold unknown settings {unknown} "
                                 f"(state from another optimizer class?)")
            merged = dict(g)
            merged.update({k: _as_plain(v) for k, v in g_new.items() if k != "params"})
            for k in ("lr", "weight_decay", "initial_lr", "eps", "momentum", "dampening"):
                if isinstance(merged.get(k), np.ndarray) and merged[k].size == 1:
                    merged[k] = merged[k].item()            # torch allows tensor lr / weight_decay
            lr = merged["lr"]
            rounding = isinstance(lr, float) and -1e-12 < lr < 0
            # a scheduler's rounding at zero (torch's LinearLR down to end_factor=0 can leave -3e-18): torch
            # keeps such an lr, so we do too; a truly negative lr is refused
            if rounding:
                merged["lr"] = 0.0
            self._check_group(merged)
            if rounding:
                merged["lr"] = lr
            if "initial_lr" in merged:
                merged["initial_lr"] = check_number(merged["initial_lr"], "initial_lr", low=0)
            new_groups.append(merged)
        self._check_state(new_state, new_groups)
        for g, merged in zip(self.param_groups, new_groups):
            g.clear()
            g.update(merged)
        self.state = new_state

    def _check_state(self, state, groups):
        """Hook: refuse per-parameter state that the groups' settings cannot use."""

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {g[k]}" for k in sorted(g) if k not in ("params", "param_names")]
        return "\n".join(lines + [")"])
