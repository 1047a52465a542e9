"""The torch side of ``numpy_transformer/nn/activations.py``: :func:`activation`, the one place the
torch side turns an activation choice (a name or one of our modules) into torch's function."""

from __future__ import annotations

import functools

import torch.nn.functional as F

import numpy_transformer as nt

__all__ = ["activation"]

# "gelu_new": Hugging Face GPT-2's name for the tanh GELU (nt.GPTConfig's ffn="gelu_new")
_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu,
                "gelu_new": functools.partial(F.gelu, approximate="tanh")}


def activation(spec):
    """The torch function for an activation ``spec``, the one place the torch side resolves one.

    ``spec`` is ``"relu"`` (``F.relu``), ``"gelu"`` (``F.gelu``, exact), ``"silu"`` (``F.silu``), a
    ``numpy_transformer`` activation module (``nt.ReLU``; ``nt.GELU``, honouring its ``approximate``;
    ``nt.SiLU``), or any other callable
    (returned as is: a torch function or ``torch.nn`` module).
    """
    if isinstance(spec, nt.Module):                 # before callable(): nt modules are callable too
        if isinstance(spec, nt.ReLU):
            return F.relu
        if isinstance(spec, nt.GELU):
            return F.gelu if spec.approximate == "none" else functools.partial(F.gelu, approximate=spec.approximate)
        if isinstance(spec, nt.SiLU):
            return F.silu
        raise TypeError(f"no torch function for the activation module {type(spec).__name__}")
    if isinstance(spec, str):
        if spec in _ACTIVATIONS:
            return _ACTIVATIONS[spec]
    elif callable(spec):
        return spec
    raise ValueError(f"activation must be one of {', '.join(map(repr, _ACTIVATIONS))}, an nt.ReLU/nt.GELU/nt.SiLU "
                     f"module or a callable, got {spec!r}")
