"""Moving weights, gradients and dropout masks between ``numpy_transformer`` and PyTorch.

Everything goes through ``state_dict`` (both sides use torch's keys), so no renaming happens here.
Arrays keep their dtype: a float64 array becomes a float64 tensor and back. A dtype mismatch between
the two modules is refused (``cast=True`` allows it) so that a float32 copy can never silently stand
in for a float64 oracle.

A leaf: nothing else of ``reference_torch`` is imported here (the twin of one of our modules, weights
copied, is :func:`reference_torch.table.twin`).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

__all__ = [
    "torch_dtype", "numpy_dtype", "to_tensor", "to_numpy", "state_dict_to_numpy", "state_dict_to_torch",
    "to_torch", "from_torch", "grads_to_numpy", "masks_to_torch", "optimizer_state_to_numpy",
    "optimizer_state_to_torch",
]

_NP_TO_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                np.dtype(np.float16): torch.float16, np.dtype(np.bool_): torch.bool,
                np.dtype(np.int64): torch.int64, np.dtype(np.int32): torch.int32}
_TORCH_TO_NP = {v: k for k, v in _NP_TO_TORCH.items()}


def torch_dtype(dtype):
    """The torch dtype of a NumPy dtype (``np.float64`` -> ``torch.float64``)."""
    return _NP_TO_TORCH[np.dtype(dtype)]


def numpy_dtype(dtype):
    """The NumPy dtype of a torch dtype (``torch.float32`` -> ``np.float32``)."""
    return _TORCH_TO_NP[dtype]


def to_tensor(array, requires_grad=False):
    """An ndarray as a tensor of the same dtype (a copy, so later in-place changes do not leak)."""
    t = torch.from_numpy(np.array(array, copy=True))
    return t.requires_grad_(requires_grad) if requires_grad else t


def to_numpy(tensor):
    """A tensor as an ndarray of the same dtype (a copy), or None for None."""
    if tensor is None:
        return None
    return tensor.detach().cpu().numpy().copy()


def state_dict_to_numpy(torch_module):
    """``torch_module.state_dict()`` as ``OrderedDict(name -> ndarray copy)``."""
    return OrderedDict((k, to_numpy(v)) for k, v in torch_module.state_dict().items())


def state_dict_to_torch(np_module):
    """``np_module.state_dict()`` as ``OrderedDict(name -> tensor copy)`` of the same dtypes."""
    return OrderedDict((k, to_tensor(v)) for k, v in np_module.state_dict().items())


def _check_dtypes(src, dst, src_name, dst_name):
    bad = [f"{k}: {src[k].dtype} -> {dst[k].dtype}" for k in src if k in dst
           and numpy_dtype(dst[k].dtype) != np.dtype(src[k].dtype)]
    if bad:
        raise TypeError(f"dtype mismatch copying {src_name} into {dst_name} ({'; '.join(bad)}); build both "
                        "with the same dtype, or pass cast=True to convert")


def to_torch(np_module, torch_module, strict=True, cast=False):
    """Copy ``np_module``'s weights into ``torch_module`` (via state_dict); returns ``torch_module``.

    Raises ``TypeError`` when dtypes differ (unless ``cast``), and, with ``strict``, torch's
    ``RuntimeError`` for missing/unexpected keys or wrong shapes.
    """
    sd = np_module.state_dict()
    if not cast:
        _check_dtypes({k: np.asarray(v) for k, v in sd.items()},
                      {k: v for k, v in torch_module.state_dict().items()},
                      type(np_module).__name__, type(torch_module).__name__)
    torch_module.load_state_dict(OrderedDict((k, to_tensor(v)) for k, v in sd.items()), strict=strict)
    return torch_module


def from_torch(torch_module, np_module, strict=True, cast=False):
    """Copy ``torch_module``'s weights into ``np_module`` (via state_dict); returns ``np_module``."""
    sd = state_dict_to_numpy(torch_module)
    if not cast:
        own = np_module.state_dict()
        bad = [f"{k}: {sd[k].dtype} -> {np.asarray(own[k]).dtype}" for k in sd
               if k in own and sd[k].dtype != np.asarray(own[k]).dtype]
        if bad:
            raise TypeError(f"dtype mismatch copying {type(torch_module).__name__} into "
                            f"{type(np_module).__name__} ({'; '.join(bad)}); pass cast=True to convert")
    np_module.load_state_dict(sd, strict=strict)
    return np_module


def grads_to_numpy(torch_module):
    """``{parameter name: gradient ndarray (or None when it got none)}`` in ``named_parameters`` order."""
    return OrderedDict((name, to_numpy(p.grad)) for name, p in torch_module.named_parameters())


def masks_to_torch(masks):
    """``{name: bool keep-mask ndarray}`` (``nt.dropout_masks``) as ``{name: bool tensor}``."""
    return {name: torch.from_numpy(np.asarray(m, dtype=bool).copy()) for name, m in masks.items()}


def optimizer_state_to_numpy(state_dict):
    """A ``torch.optim`` optimizer's ``state_dict()`` with NumPy values, for ``nt.optim``'s
    ``load_state_dict``: buffers become array copies, ``"step"`` (a 0-d tensor) a float, tensor
    hyper-parameters (a tensor ``lr``) floats; the layout (indices, groups) is unchanged."""
    def plain(v):
        if isinstance(v, torch.Tensor):
            return float(v.item()) if v.ndim == 0 else to_numpy(v)
        if isinstance(v, (list, tuple)):
            return type(v)(plain(x) for x in v)
        return v
    return {"state": {i: {k: plain(v) for k, v in s.items()} for i, s in state_dict["state"].items()},
            "param_groups": [{k: (list(v) if k == "params" else plain(v)) for k, v in g.items()}
                             for g in state_dict["param_groups"]]}


def optimizer_state_to_torch(state_dict):
    """An ``nt.optim`` optimizer's ``state_dict()`` for a ``torch.optim`` optimizer's ``load_state_dict``:
    arrays become tensors of the same dtype, ``"step"`` a 0-d float32 tensor (torch's CPU step)."""
    def tensor(k, v):
        if k == "step":
            return torch.tensor(float(v), dtype=torch.float32)
        return to_tensor(v) if isinstance(v, np.ndarray) else v
    return {"state": {i: {k: tensor(k, v) for k, v in s.items()} for i, s in state_dict["state"].items()},
            "param_groups": [dict(g) for g in state_dict["param_groups"]]}
