"""``MixedPrecision``: a float16 working copy of a float32 model (master weights, the norms, the
softmax and the loss in float32), the recipe of Micikevicius et al. 2018 and of the seed design.

The master model keeps float32 parameters; the optimizer updates those. Each forward copies them,
rounded, into a float16 copy of the model, which runs the forward and the backward in float16:
linears, embeddings, attention's matmuls, activations, dropout, residual adds. Three things stay in
float32, where float16's 10-bit mantissa and 6.1e-5..65504 normal range break them:

* LayerNorm/RMSNorm (``norm_dtype=np.float32``): the variance is a mean of squares, and a square
  overflows float16 for |x - mean| > 256 and flushes to zero below 2.4e-4; eps = 1e-5 is itself
  below float16's normal range. The copy's norms *are* the master's norms, run on the input cast
  up, their output cast down; their gradients land in the master's ``.grad`` directly.
* the softmax: ``F.softmax_forward`` and the attention's softmax backward compute a float16 input
  in float32 and round the result (numpy_transformer/functional/softmax.py, attention.py).
* the loss: :meth:`MixedPrecision.forward` returns float32 logits; ``CrossEntropyLoss`` refuses float16.

The backward's gradients arrive in float16 and are added, cast to float32, to the master parameters'
``.grad``; :class:`numpy_transformer.amp.GradScaler` scales the loss gradient before the backward
(small gradients would flush to zero in float16) and unscales these float32 gradients before the step.
"""

from __future__ import annotations

import copy

import numpy as np

from ..nn import Module
from ..nn.norms import LayerNorm, RMSNorm
from ..utils.checks import FLOAT16, allow_float16

__all__ = ["MixedPrecision", "Float32Norm"]

NORM_TYPES = (LayerNorm, RMSNorm)


class Float32Norm(Module):
    """A float32 LayerNorm/RMSNorm inside a float16 model: float16 in, float32 compute with the
    norm's own (float32) weights, float16 out; the backward likewise (its gradients stay float32)."""

    def __init__(self, norm):
        super().__init__()
        if not isinstance(norm, NORM_TYPES) or norm.dtype != np.float32:
            raise TypeError(f"norm must be a float32 LayerNorm or RMSNorm, got {norm!r}")
        self.norm = norm

    def forward(self, x):
        return self.norm(x.astype(np.float32)).astype(np.float16)

    def backward(self, dout):
        return self.norm.backward(dout.astype(np.float32)).astype(np.float16)


def _cast_module_to_float16(module):
    """In place: every float parameter and buffer, every float32 NumPy scalar attribute and every ``dtype``
    attribute to float16."""
    for m in module.modules():
        for p in m._parameters.values():
            if p is not None and p.data.dtype.kind == "f":
                p.data = p.data.astype(np.float16)
        for k, b in list(m._buffers.items()):
            if isinstance(b, np.ndarray) and b.dtype.kind == "f":
                m._buffers[k] = b.astype(np.float16)
        for k, v in list(vars(m).items()):                # float32 constants such as the embedding's sqrt(D)
            if isinstance(v, np.floating) and v.dtype == np.float32:
                object.__setattr__(m, k, np.float16(v))
        if isinstance(getattr(m, "dtype", None), np.dtype):
            object.__setattr__(m, "dtype", FLOAT16)
        if isinstance(getattr(m, "config", None), dict) and "dtype" in m.config:
            m.config = dict(m.config, dtype="float16")


def _replace(root, name, new):
    *path, last = name.split(".")
    parent = root
    for part in path:
        parent = parent._modules[part]
    parent._modules[last] = new


def _to_float32(x):
    if isinstance(x, np.ndarray) and x.dtype == np.float16:
        return x.astype(np.float32)
    if isinstance(x, tuple):
        return tuple(_to_float32(v) for v in x)
    return x


class MixedPrecision:
    """Train a float32 ``model`` in float16: a float16 copy runs the forward and backward, the float32
    master parameters (``model.parameters()``) get the gradients and the optimizer's updates.

    Parameters
    ----------
    model : Module
        A float32 model (``TransformerModel``, ``GPT``, a layer, ...) with ``forward``/``backward``.
        It stays the one to optimise, save and evaluate.
    norm_dtype : np.float32 or np.float16
        Where the copy's LayerNorm/RMSNorm compute. ``np.float32`` (default, torch.autocast's and the
        seed design's choice) shares the master's norms; ``np.float16`` keeps float16 norms in the
        copy (only to study why not: docs/mixed-precision.md).

    Each ``forward`` first copies the master weights into the copy (rounded to float16; above 65504
    they become inf). Inf/NaN produced in float16 are not warned about: :class:`GradScaler` finds them
    in the gradients and skips the step. The copy's dropout draws from its own generators (a deep copy
    of the master's at construction), so a mixed run's masks are its own.

    Examples
    --------
    >>> mp = MixedPrecision(model); opt = nt.optim.Adam(model.parameters()); scaler = GradScaler()
    >>> logits = mp(ids)                                    # float32 logits from the float16 copy
    >>> loss = crit(logits.reshape(-1, V), tgt.reshape(-1))
    >>> mp.backward(scaler.scale(crit.backward().reshape(logits.shape)))
    >>> scaler.step(opt); scaler.update(); opt.zero_grad()
    """

    def __init__(self, model, norm_dtype=np.float32):
        if not isinstance(model, Module):
            raise TypeError(f"model must be an nt Module, got {type(model).__name__}")
        dtypes = {p.data.dtype for p in model.parameters()}
        if dtypes != {np.dtype(np.float32)}:
            raise TypeError(f"model must have float32 parameters (the master weights), got {sorted(map(str, dtypes))}; "
                            "build it with dtype=np.float32")
        norm_dtype = np.dtype(norm_dtype) if norm_dtype in (np.float32, np.float16, "float32", "float16") else None
        if norm_dtype is None:
            raise TypeError("norm_dtype must be np.float32 (the norms in float32, the default) or np.float16")
        self.model = model
        self.norm_dtype = norm_dtype
        with allow_float16():
            half = copy.deepcopy(model)
            _cast_module_to_float16(half)
        if norm_dtype == np.float32:
            for (name, m32), (_, m16) in zip(model.named_modules(), list(half.named_modules())):
                if isinstance(m16, NORM_TYPES) and name:
                    _replace(half, name, Float32Norm(m32))
            if isinstance(half, NORM_TYPES):
                raise TypeError("model is itself a norm: with norm_dtype=np.float32 nothing would run in float16")
        self.half = half
        master = dict(model.named_parameters())
        shared = {id(p) for p in model.parameters()}
        # (master, float16 copy) pairs by name; the shared float32 norms need no copy
        self._pairs = [(master[n], p) for n, p in half.named_parameters() if id(p) not in shared]

    def parameters(self):
        """The float32 master parameters (what the optimizer gets)."""
        return self.model.parameters()

    def train(self, mode=True):
        self.model.train(mode)
        self.half.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def _sync(self):
        with np.errstate(over="ignore"):
            for p32, p16 in self._pairs:
                np.copyto(p16.data, p32.data, casting="unsafe")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """The float16 copy's forward on the current master weights; float16 outputs come back as float32.
        Float inputs are cast to float16 (integer ids pass unchanged)."""
        self._sync()
        args = [a.astype(np.float16) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a for a in args]
        with allow_float16(), np.errstate(over="ignore", invalid="ignore"):
            return _to_float32(self.half(*args, **kwargs))

    def backward(self, dout):
        """The float16 backward of ``dout`` (the scaled loss gradient, cast to float16: above 65504 it
        becomes inf, for the scaler to see); each copy gradient is added, as float32, to its master's
        ``.grad``. Returns the input gradients as float32 (or what the model returns)."""
        if not isinstance(dout, np.ndarray) or dout.dtype.kind != "f":
            raise TypeError(f"dout must be a float array (the loss gradient), got {type(dout).__name__}"
                            + (f" of dtype {dout.dtype}" if isinstance(dout, np.ndarray) else ""))
        with allow_float16(), np.errstate(over="ignore", invalid="ignore"):
            grads = self.half.backward(dout.astype(np.float16))
        for p32, p16 in self._pairs:
            if p16.grad is not None:
                p32.accumulate(p16.grad.astype(np.float32), owned=True)
                p16.grad = None
        return _to_float32(grads)

    def __repr__(self):
        return f"MixedPrecision(norm_dtype={self.norm_dtype.name}, model={type(self.model).__name__})"
