"""``GradScaler``: dynamic loss scaling, ``torch.amp.GradScaler``'s logic on NumPy gradients.

float16's smallest normal number is 6.1e-5 (subnormals reach 6e-8): gradients of a float16 backward
smaller than that lose digits or flush to zero. Multiplying the loss gradient by a large ``scale``
(2**16 by default) lifts every gradient of the backward by the same factor (the backward is linear in
its upstream gradient); :meth:`GradScaler.unscale_` divides the float32 master gradients by it again
before the optimizer uses them. Too large a scale overflows to inf: then the step is skipped and the
scale halved. After ``growth_interval`` steps without inf/NaN the scale doubles. One loop::

    dlogits = crit.backward().reshape(logits.shape)
    model.backward(scaler.scale(dlogits))     # float16 backward of the scaled loss gradient
    scaler.unscale_(optimizer)                # optional: to clip the true gradients first
    clip_grad_norm_(params, 1.0)
    scaler.step(optimizer)                    # skipped if a gradient is inf/NaN
    scaler.update()                           # back off (inf/NaN seen) or grow (growth_interval clean steps)

As torch, the scale is a float32 number and the growth tracker an int32; the update is torch's
``_amp_update_scale_`` kernel (the product in double, stored in float32; a growth to inf is not taken).
"""

from __future__ import annotations

import numpy as np

from ..utils.checks import check_number, check_positive_int

__all__ = ["GradScaler"]

READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Dynamic loss scaling with torch's arguments, defaults and methods (``torch.amp.GradScaler``).

    Parameters
    ----------
    init_scale : float
        The first scale (torch: ``2.0**16``).
    growth_factor : float
        Multiplies the scale after ``growth_interval`` consecutive steps without inf/NaN (> 1).
    backoff_factor : float
        Multiplies the scale after a step whose gradients held an inf or NaN (in (0, 1)).
    growth_interval : int
        Consecutive clean steps before the scale grows.
    enabled : bool
        ``False`` makes every method a pass-through (``scale`` returns its input, ``step`` just steps),
        so one loop serves both precisions, as torch.

    torch's first argument, ``device``, has no meaning here and is not taken.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        init_scale = check_number(init_scale, "init_scale", low=0, low_open=True)
        growth_factor = check_number(growth_factor, "growth_factor", low=1, low_open=True)
        backoff_factor = check_number(backoff_factor, "backoff_factor", 0, 1, low_open=True, high_open=True)
        growth_interval = check_positive_int(growth_interval, "growth_interval")
        if not isinstance(enabled, (bool, np.bool_)):
            raise TypeError(f"enabled must be a bool, got {enabled!r}")
        self._enabled = bool(enabled)
        self._init_scale = init_scale
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._scale = None                # np.float32, set on first use (torch's lazy init)
        self._growth_tracker = None       # np.int32
        self._per_optimizer = {}          # id(optimizer) -> {"stage": ..., "found_inf": bool}

    # -- scaling ------------------------------------------------------------------------------------
    def _lazy_init(self):
        if self._scale is None:
            self._scale = np.float32(self._init_scale)
            self._growth_tracker = np.int32(0)

    def scale(self, outputs):
        """``outputs * scale``: a loss (number), a loss gradient (ndarray), or a list/tuple of them.

        The result's dtype is torch's, whose scale is a 0-dim float32 tensor and follows its type
        promotion: an n-d array (``ndim >= 1``) keeps its dtype (a 0-dim tensor does not promote a
        dimensioned one): float32 and float64 arrays are multiplied by the scale in their own dtype; a
        float16 array is multiplied in float32 and rounded to float16 once, as torch's CPU kernel
        computes float16 (so ``0.5 * 2**16`` is 32768, and only a product above float16's 65504 is
        inf; casting the scale to float16 first would make the default 2**16 itself inf). A 0-d array
        or a NumPy scalar (the usual shape of a loss) promotes with the scale as two 0-dim tensors do:
        float16 gives float32 (``scale(np.array(3, np.float16))`` is 196608.0, not float16's inf),
        float32 stays float32, float64 stays float64; a 0-d array stays a 0-d array. A Python number
        (which torch's ``scale`` refuses) is taken as torch takes a Python number against a float32
        tensor: the product is float32. Disabled: ``outputs`` unchanged.
        """
        if not self._enabled:
            return outputs
        self._lazy_init()
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, np.ndarray):
            if outputs.dtype.kind != "f":
                raise TypeError(f"outputs must be a float array or number, got dtype {outputs.dtype}")
            with np.errstate(over="ignore"):          # an inf here is what unscale_ finds and step skips
                if outputs.ndim == 0:                 # two 0-dim tensors: the wider dtype (float16 -> float32)
                    return np.asarray(outputs * self._scale)
                if outputs.dtype == np.float16:       # torch's float16 arithmetic: float32, rounded once
                    return (outputs.astype(np.float32) * self._scale).astype(np.float16)
                return outputs * outputs.dtype.type(self._scale)
        if isinstance(outputs, (bool, np.bool_)) or not isinstance(outputs, (int, float, np.number)):
            raise TypeError(f"outputs must be a loss (number), an ndarray or a list/tuple of them, "
                            f"got {type(outputs).__name__}")
        with np.errstate(over="ignore"):              # NumPy scalars as 0-d arrays; a Python number is float32
            return outputs * self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale, in place, and note whether any is inf/NaN.

        Called at most once per optimizer between two :meth:`update` calls, and before :meth:`step`
        (RuntimeError otherwise, as torch). float16 gradients are refused (ValueError, torch's
        "Attempting to unscale FP16 gradients."): the master parameters and their gradients must be
        float32 (:class:`numpy_transformer.amp.MixedPrecision` keeps them so).
        """
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        if self._scale is None:
            raise RuntimeError("unscale_() called before scale(): no loss was scaled since the scaler was made "
                               "(torch: 'Attempted unscale_ but _scale is None.')")
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        for g in grads:
            if g.dtype == np.float16:
                raise ValueError("Attempting to unscale FP16 gradients: the optimizer must hold float32 master "
                                 "parameters (wrap the model in numpy_transformer.amp.MixedPrecision)")
        inv_scale = np.float32(1.0 / np.float64(self._scale))      # torch: scale.double().reciprocal().float()
        found_inf = False
        for g in grads:
            found_inf = found_inf or not np.isfinite(g).all()
            g *= g.dtype.type(inv_scale)
        state["found_inf"] = found_inf
        state["stage"] = UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` unless the (unscaled) gradients hold an inf or NaN: then the step is
        skipped, the parameters and optimizer state unchanged, and None returned.

        Unscales first if :meth:`unscale_` was not called. A closure is refused (as torch).
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs or args:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == READY:
            self.unscale_(optimizer)
        retval = None if state["found_inf"] else optimizer.step()
        state["stage"] = STEPPED
        return retval

    def update(self, new_scale=None):
        """Back off the scale if any optimizer saw inf/NaN since the last update, else count a clean step
        and grow the scale every ``growth_interval`` of them; or set ``new_scale`` as it is."""
        if not self._enabled:
            return
        if new_scale is not None:
            if self._scale is None:
                self._lazy_init()
            self._scale = np.float32(check_number(new_scale, "new_scale", low=0, low_open=True))
        else:
            if not any(s["stage"] != READY for s in self._per_optimizer.values()):
                raise AssertionError("No inf checks were recorded prior to update.")
            found_inf = any(s["found_inf"] for s in self._per_optimizer.values())
            self._update_scale(found_inf)
        self._per_optimizer = {}

    def _update_scale(self, found_inf):
        """torch's ``_amp_update_scale_`` (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp)."""
        if found_inf:
            with np.errstate(under="ignore"):
                self._scale = np.float32(np.float64(self._scale) * self._backoff_factor)
            self._growth_tracker = np.int32(0)
            return
        successful = int(self._growth_tracker) + 1
        if successful == self._growth_interval:
            with np.errstate(over="ignore"):                     # float32 overflow: inf, not taken
                grown = np.float32(np.float64(self._scale) * self._growth_factor)
            if np.isfinite(grown):
                self._scale = grown
            self._growth_tracker = np.int32(0)
        else:
            self._growth_tracker = np.int32(successful)

    # -- accessors and state --------------------------------------------------------------------------
    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled; ``init_scale`` before first use)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale)

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return 0 if self._growth_tracker is None else int(self._growth_tracker)

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = check_number(new_factor, "new_factor", low=1, low_open=True)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = check_number(new_factor, "new_factor", 0, 1, low_open=True, high_open=True)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = check_positive_int(new_interval, "new_interval")

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """torch's keys: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
        ``_growth_tracker`` (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Load :meth:`state_dict`'s values (torch's too: tensors or numbers). Every value is checked
        before anything changes."""
        if not self._enabled:
            return
        if not isinstance(state_dict, dict):
            raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
        missing = [k for k in keys if k not in state_dict]
        if missing:
            raise KeyError(f"GradScaler state_dict is missing {missing}; it has {sorted(state_dict)}")
        v = {k: np.asarray(state_dict[k]).item() for k in keys}
        scale = check_number(v["scale"], "state_dict['scale']", low=0, low_open=True)
        growth = check_number(v["growth_factor"], "state_dict['growth_factor']", low=1, low_open=True)
        backoff = check_number(v["backoff_factor"], "state_dict['backoff_factor']", 0, 1, low_open=True,
                               high_open=True)
        interval = check_positive_int(v["growth_interval"], "state_dict['growth_interval']")
        tracker = v["_growth_tracker"]
        if isinstance(tracker, bool) or not isinstance(tracker, int) or not 0 <= tracker < interval:
            raise ValueError(f"state_dict['_growth_tracker'] must be an int in [0, growth_interval={interval}), "
                             f"got {tracker!r}")
        self._init_scale, self._scale = scale, np.float32(scale)
        self._growth_factor, self._backoff_factor, self._growth_interval = growth, backoff, interval
        self._growth_tracker = np.int32(tracker)

    def __repr__(self):
        return (f"GradScaler(scale={self.get_scale():g}, growth_factor={self._growth_factor:g}, "
                f"backoff_factor={self._backoff_factor:g}, growth_interval={self._growth_interval}, "
                f"enabled={self._enabled})")
