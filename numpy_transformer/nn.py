"""Modules shaped like ``torch.nn``: same class names, constructor arguments, defaults, mask semantics
and ``state_dict`` keys, so weights move between the two with no renaming.

Every module has ``forward`` (also via ``__call__``) and ``backward(dout)``. ``backward`` uses the cache
of the *last* forward, returns the gradient of the input(s) and *adds* every parameter's gradient into
``p.grad`` (accumulation, as torch). A forward's cache is released by its backward, so ``backward``
before ``forward``, or twice for one forward, raises ``RuntimeError``. Every input is validated before
anything changes: a refused call (TypeError, ValueError, IndexError with a message naming the argument,
what was expected and what was received) leaves the module usable, and a ``backward`` refused for a
gradient of the wrong shape or dtype keeps the forward's cache for the next, correct call.

Shape letters: B batch, S sequence (query) length, T key length, D d_model, H heads, Dh = D/H,
F dim_feedforward, V vocabulary.
"""

from __future__ import annotations

import copy
import functools
import math
from collections import OrderedDict
from typing import Iterator, NamedTuple, Optional

import numpy as np

from . import functional as F
from . import _trace
from ._checks import (as_float_dtype, as_generator, check_float_array, check_float_input, check_grad, check_ids,
                      check_mask, check_number, check_positive_int, check_probability)

__all__ = [
    "Parameter", "Module", "ModuleList", "Linear", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TokenEmbedding",
    "PositionalEncoding", "dropout_masks", "IncompatibleKeys",
]


class Parameter:
    """A trainable array: ``.data`` holds the value, ``.grad`` the accumulated gradient (or None)."""

    def __init__(self, data):
        self.data = np.asarray(data)
        self.grad = None

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def accumulate(self, grad, owned=False):
        """Add ``grad`` into ``.grad`` (allocating it on the first call), as torch's autograd does.

        ``owned=True`` says ``grad`` is a fresh array nobody else holds (what the functional backwards
        return), so the first call may keep it instead of copying it.
        """
        if self.grad is None:
            fresh = owned and grad.dtype == self.data.dtype and grad.flags.c_contiguous and grad.flags.writeable
            self.grad = grad if fresh else np.array(grad, dtype=self.data.dtype, copy=True)
        else:
            self.grad += grad

    def __repr__(self):
        return f"Parameter(shape={self.data.shape}, dtype={self.data.dtype})"


class IncompatibleKeys(NamedTuple):
    missing_keys: list
    unexpected_keys: list


class Module:
    """Base class: registers parameters, buffers and sub-modules by attribute assignment, like torch.

    Subclasses define ``forward`` and ``backward``. When a trace is active (``nt.trace``), ``__call__``
    records each forward output and every subclass's ``backward`` records the gradient it returns
    (the wrapping happens once, in ``__init_subclass__``, so the layers' code stays plain maths).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        backward = cls.__dict__.get("backward")
        if backward is not None and not getattr(backward, "_traced", False):
            @functools.wraps(backward)
            def traced_backward(self, *args, **kw):
                cache = self.__dict__.get("_cache")
                try:
                    grad = backward(self, *args, **kw)
                except Exception:
                    # A refused call (wrong gradient shape or dtype) must not cost the forward's cache:
                    # the next, correct backward still works.
                    if self.__dict__.get("_cache") is None:
                        object.__setattr__(self, "_cache", cache)
                    raise
                if _trace.active():
                    _trace.record_backward(self, grad)
                return grad
            traced_backward._traced = True
            cls.backward = traced_backward

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_cache", None)

    # -- registration --------------------------------------------------------------------------
    def __setattr__(self, name, value):
        for table in ("_parameters", "_modules", "_buffers"):
            self.__dict__.get(table, {}).pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for table in ("_parameters", "_modules", "_buffers"):
            d = self.__dict__.get(table)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter or None) under ``name``; None keeps the slot empty, as torch."""
        if param is None:
            self.__dict__.get("_parameters").pop(name, None)
            object.__setattr__(self, name, None)
        else:
            setattr(self, name, param)

    def register_buffer(self, name, array, persistent=True):
        """A non-trainable array; in ``state_dict()`` only when ``persistent``."""
        self.__dict__.pop(name, None)
        self._buffers[name] = array
        if not persistent:
            self._non_persistent.add(name)

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        object.__setattr__(self, "_cache", None)    # a forward that raises leaves no stale cache behind
        out = self.forward(*args, **kwargs)
        if _trace.active():
            _trace.record_forward(self, out, args)
        return out

    def forward(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, dout):  # pragma: no cover - abstract
        raise NotImplementedError

    def _save(self, cache):
        self._cache = cache

    def _take(self):
        """The last forward's cache, released so that a second backward is caught."""
        cache = self._cache
        if cache is None:
            raise RuntimeError(f"{type(self).__name__}.backward() called before forward(), or twice for one "
                               "forward: call forward again first (each backward consumes its forward's cache)")
        self._cache = None
        return cache

    # -- traversal -----------------------------------------------------------------------------
    def named_modules(self, prefix="") -> Iterator:
        yield prefix, self
        for name, mod in self._modules.items():
            yield from mod.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix="", recurse=True) -> Iterator:
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, mod in mods:
            for name, p in mod._parameters.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mprefix}.{name}" if mprefix else name), p

    def parameters(self, recurse=True):
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix=""):
        for mprefix, mod in self.named_modules(prefix):
            for name, b in mod._buffers.items():
                yield (f"{mprefix}.{name}" if mprefix else name), b

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self):
        """An ordered dict ``name -> ndarray`` of parameters and persistent buffers (torch's keys).

        The arrays are the module's own (no copy), as torch's tensors share storage.
        """
        sd = OrderedDict()
        for mprefix, mod in self.named_modules():
            for name, p in mod._parameters.items():
                sd[f"{mprefix}.{name}" if mprefix else name] = p.data
            for name, b in mod._buffers.items():
                if name not in mod._non_persistent:
                    sd[f"{mprefix}.{name}" if mprefix else name] = b
        return sd

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays from ``state_dict`` into this module's parameters and persistent buffers.

        Everything is validated before anything is written, so a refused dict leaves the module as it
        was. Values are converted to each parameter's dtype (as torch's ``copy_``) when they are
        floating point; any other dtype is refused.

        Raises
        ------
        TypeError
            ``state_dict`` is not a mapping, or an array is not floating point (float16, float32 and
            float64 are accepted and converted; int, bool, object, None are refused).
        KeyError
            ``strict`` and keys are missing or unexpected (the message names them).
        ValueError
            An array's shape differs from the parameter's (the message names the key and both shapes).

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            hint = (" (a checkpoint file? use nt.checkpoint.load_checkpoint(path).load_model(model))"
                    if isinstance(state_dict, (str, bytes)) or hasattr(state_dict, "__fspath__") else "")
            raise TypeError(f"state_dict must be a mapping of name -> array, like the one state_dict() returns; "
                            f"got {type(state_dict).__name__}{hint}")
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"Error loading state_dict into {type(self).__name__}: "
                           f"missing keys {missing}, unexpected keys {unexpected}")
        converted = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            value = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
            if value.dtype.kind != "f":
                raise TypeError(f"state_dict[{key!r}] must be a floating-point array of shape {target.shape}, "
                                f"got dtype {value.dtype}" + (f" ({state_dict[key]!r})" if value.ndim == 0 else ""))
            if value.shape != target.shape:
                raise ValueError(f"state_dict[{key!r}] has shape {value.shape}, but the module expects "
                                 f"{target.shape}")
            converted[key] = value
        for mprefix, mod in self.named_modules():
            for table in (mod._parameters, mod._buffers):
                for name in table:
                    key = f"{mprefix}.{name}" if mprefix else name
                    if key in converted:
                        dest = table[name].data if table is mod._parameters else table[name]
                        dest[...] = converted[key]
        return IncompatibleKeys(missing, unexpected)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad[...] = 0

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, mod in self._modules.items():
            child = repr(mod).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        return "\n".join(lines) + (")" if len(lines) == 1 else "\n)")

    def extra_repr(self):
        return ""


class ModuleList(Module):
    """A list of modules registered as ``0``, ``1``, ... (state_dict keys ``layers.0.…``, as torch)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self._modules[str(len(self._modules))] = module
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


def _dtype_of(dtype):
    return as_float_dtype(dtype)


def _uniform(rng, bound, shape, dtype):
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


class Linear(Module):
    """``y = x W^T + b``, as ``torch.nn.Linear`` (same init: U(-1/sqrt(in), 1/sqrt(in)) for W and b).

    Parameters
    ----------
    in_features, out_features : int
    bias : bool
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
    """

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        self.in_features = check_positive_int(in_features, "in_features")
        self.out_features = check_positive_int(out_features, "out_features")
        self.dtype = _dtype_of(dtype)
        rng = as_generator(seed)
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(_uniform(rng, bound, (out_features, in_features), self.dtype))
        self.register_parameter("bias", Parameter(_uniform(rng, bound, (out_features,), self.dtype)) if bias else None)

    def forward(self, x):
        """x (..., in_features) -> (..., out_features)."""
        x = check_float_input(x, "input", self.dtype, last_dim=self.in_features, shape_doc="(..., in_features)")
        out, cache = F.linear_forward(x, self.weight.data, self.bias.data if self.bias is not None else None)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., out_features) -> dx (..., in_features); accumulates weight.grad and bias.grad."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        dx, dw, db = F.linear_backward(dout, cache)
        self.weight.accumulate(dw, owned=True)
        if self.bias is not None:
            self.bias.accumulate(db, owned=True)
        return dx

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Lookup table, as ``torch.nn.Embedding`` (init N(0, 1); ``padding_idx`` row zero and frozen).

    Parameters
    ----------
    num_embeddings : int
        V, the vocabulary size.
    embedding_dim : int
        D.
    padding_idx : int, optional
    dtype, seed : see :class:`Linear`
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=np.float32, seed=None):
        super().__init__()
        self.num_embeddings = check_positive_int(num_embeddings, "num_embeddings")
        self.embedding_dim = check_positive_int(embedding_dim, "embedding_dim")
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) \
                    or not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx must be an int in [-{num_embeddings}, {num_embeddings}), got {padding_idx!r}")
            padding_idx = padding_idx % num_embeddings
        self.padding_idx = padding_idx
        self.dtype = _dtype_of(dtype)
        w = as_generator(seed).standard_normal((num_embeddings, embedding_dim)).astype(self.dtype)
        if padding_idx is not None:
            w[padding_idx] = 0
        self.weight = Parameter(w)

    def forward(self, ids):
        """ids (...) integer in [0, V) -> (..., D)."""
        ids = check_ids(ids, "input", self.num_embeddings)
        out, cache = F.embedding_forward(ids, self.weight.data, self.padding_idx)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., D) -> None (ids have no gradient); accumulates weight.grad by scatter-add."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        self.weight.accumulate(F.embedding_backward(dout, cache))
        return None

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Layer normalisation over the last dimension, as ``torch.nn.LayerNorm``.

    Parameters
    ----------
    normalized_shape : int or 1-tuple
        D (only normalisation over the last dimension is supported).
    eps : float
    elementwise_affine : bool
    bias : bool
    dtype : np.float32 or np.float64
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float32):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list)):
            if len(normalized_shape) != 1:
                raise ValueError("normalized_shape must be an int or a 1-tuple (normalisation over the last "
                                 f"dimension only), got {tuple(normalized_shape)}")
            normalized_shape = normalized_shape[0]
        d = check_positive_int(normalized_shape, "normalized_shape")
        self.normalized_shape = (d,)
        self.eps = check_number(eps, "eps", low=0, low_open=True)
        self.elementwise_affine = elementwise_affine
        self.dtype = _dtype_of(dtype)
        self.register_parameter("weight", Parameter(np.ones(d, dtype=self.dtype)) if elementwise_affine else None)
        self.register_parameter("bias", Parameter(np.zeros(d, dtype=self.dtype))
                                if elementwise_affine and bias else None)

    def forward(self, x):
        """x (..., D) -> (..., D)."""
        x = check_float_input(x, "input", self.dtype, last_dim=self.normalized_shape[0], shape_doc="(..., D)")
        out, cache = F.layer_norm_forward(x, None if self.weight is None else self.weight.data,
                                          None if self.bias is None else self.bias.data, self.eps)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., D) -> dx (..., D); accumulates weight.grad and bias.grad."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        dx, dw, db = F.layer_norm_backward(dout, cache)
        if self.weight is not None:
            self.weight.accumulate(dw, owned=True)
        if self.bias is not None:
            self.bias.accumulate(db, owned=True)
        return dx

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    """Inverted dropout with the module's own seeded generator; the identity in eval mode.

    After a training-mode forward, ``last_mask`` holds the bool keep-mask used (so a reference
    implementation can replay it); ``backward`` uses the same mask.
    """

    def __init__(self, p=0.5, seed=None):
        super().__init__()
        self.p = check_probability(p)
        self.rng = as_generator(seed)
        self.last_mask = None

    def forward(self, x):
        x = check_float_array(x, "input")
        out, cache = F.dropout_forward(x, self.p, self.training, self.rng)
        self.last_mask = cache.mask
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        dout = check_grad(dout, "dout", shape, dtype)
        return F.dropout_backward(dout, cache)

    def extra_repr(self):
        return f"p={self.p}"


class ReLU(Module):
    """``max(x, 0)`` as a module (what ``activation="relu"`` builds)."""

    def forward(self, x):
        x = check_float_array(x, "input")
        out, cache = F.relu_forward(x)
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        return F.relu_backward(check_grad(dout, "dout", shape, dtype), cache)


class GELU(Module):
    """GELU as a module; ``approximate="none"`` (exact, erf) or ``"tanh"``, as ``torch.nn.GELU``."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        x = check_float_array(x, "input")
        out, cache = F.gelu_forward(x, self.approximate)
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        return F.gelu_backward(check_grad(dout, "dout", shape, dtype), cache)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


def _xavier_uniform(rng, shape, dtype):
    fan_out, fan_in = shape
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return _uniform(rng, bound, shape, dtype)


class MultiheadAttention(Module):
    """Multi-head attention, as ``torch.nn.MultiheadAttention`` (same parameters, masks and outputs).

    Parameters
    ----------
    embed_dim : int
        D. Must be divisible by ``num_heads``.
    num_heads : int
        H; each head has width Dh = D / H.
    dropout : float
        Dropout on the attention probabilities (train mode only).
    bias : bool
        Biases on the input and output projections.
    kdim, vdim : int, optional
        Feature sizes of key and value (default D). When they differ from D the projections are the
        separate ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight`` instead of the packed
        ``in_proj_weight`` (3D, D), as in torch.
    batch_first : bool
        True (our default): inputs are (B, S, D); False: (S, B, D), torch's default.
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        For the initialisation and the dropout masks.
    attention : {"standard", "tiled"}
        "tiled" computes attention by tiles with an online softmax (memory linear in S, see
        :func:`numpy_transformer.functional.flash_attention_forward`); it returns no weights, so it
        needs ``need_weights=False``.
    block_size : int
        Tile size of the tiled path.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None,
                 batch_first=True, dtype=np.float32, seed=None, attention="standard", block_size=128):
        super().__init__()
        if attention not in ("standard", "tiled"):
            raise ValueError(f"attention must be 'standard' or 'tiled', got {attention!r}")
        self.attention = attention
        self.block_size = check_positive_int(block_size, "block_size")
        self.embed_dim = check_positive_int(embed_dim, "embed_dim")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} ({embed_dim} % {num_heads} = {embed_dim % num_heads})")
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else check_positive_int(kdim, "kdim")
        self.vdim = embed_dim if vdim is None else check_positive_int(vdim, "vdim")
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout = check_probability(dropout)
        self.batch_first = bool(batch_first)
        self.dtype = _dtype_of(dtype)
        rng = as_generator(seed)
        d = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_xavier_uniform(rng, (3 * d, d), self.dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(_xavier_uniform(rng, (d, d), self.dtype))
            self.k_proj_weight = Parameter(_xavier_uniform(rng, (d, self.kdim), self.dtype))
            self.v_proj_weight = Parameter(_xavier_uniform(rng, (d, self.vdim), self.dtype))
        self.register_parameter("in_proj_bias", Parameter(np.zeros(3 * d, dtype=self.dtype)) if bias else None)
        self.out_proj = Linear(d, d, bias=bias, dtype=self.dtype, seed=rng)
        if bias:
            self.out_proj.bias.data[...] = 0
        self.rng = rng.spawn(1)[0]                      # attention-dropout masks
        self.last_mask = None

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Attention of ``query`` over ``key``/``value``.

        Parameters
        ----------
        query : ndarray, (B, S, D) if batch_first else (S, B, D)
        key : ndarray, (B, T, kdim) if batch_first else (T, B, kdim)
        value : ndarray, (B, T, vdim) if batch_first else (T, B, vdim)
        key_padding_mask : ndarray (B, T), bool (True = ignore that key) or float (added), optional
        need_weights : bool
            Return the attention weights (after dropout, as torch).
        attn_mask : ndarray (S, T) or (B*H, S, T), bool (True = may not attend) or float, optional
        average_attn_weights : bool
            Average the weights over heads: (B, S, T); else (B, H, S, T).
        is_causal : bool
            With no ``attn_mask``, apply a causal mask; with one, a hint only (the mask is used).

        Returns
        -------
        out : ndarray, shaped like ``query``
        weights : ndarray or None
        """
        bf = "(B, S, D)" if self.batch_first else "(S, B, D)"
        query = check_float_input(query, "query", self.dtype, ndim=3, last_dim=self.embed_dim, shape_doc=bf)
        key = check_float_input(key, "key", self.dtype, ndim=3, last_dim=self.kdim, shape_doc=bf)
        value = check_float_input(value, "value", self.dtype, ndim=3, last_dim=self.vdim, shape_doc=bf)
        if not self.batch_first:
            if query is key and key is value:                   # keep self-attention recognisable
                query = key = value = np.swapaxes(query, 0, 1)
            else:
                query, key, value = (np.swapaxes(a, 0, 1) for a in (query, key, value))
        b, s, _ = query.shape
        t = key.shape[1]
        if b == 0 or s == 0 or t == 0:
            raise ValueError(f"attention needs a non-empty batch and sequences, got query {query.shape} and "
                             f"key {key.shape} (batch_first={self.batch_first})")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != b:
            raise ValueError(f"key and value must share batch and length with query's batch {b}: got query "
                             f"{query.shape}, key {key.shape}, value {value.shape} (batch_first={self.batch_first})")
        if need_weights and self.attention == "tiled":
            raise ValueError("attention='tiled' never forms the attention weights: call with need_weights=False "
                             "(or build the module with attention='standard')")
        key_padding_mask = check_mask(key_padding_mask, "key_padding_mask", [(b, t)], self.dtype)
        attn_mask = check_mask(attn_mask, "attn_mask", [(s, t), (b * self.num_heads, s, t)], self.dtype)
        out, probs, cache = F.multi_head_attention_forward(
            query, key, value, self.num_heads,
            in_proj_weight=None if self.in_proj_weight is None else self.in_proj_weight.data,
            in_proj_bias=None if self.in_proj_bias is None else self.in_proj_bias.data,
            out_proj_weight=self.out_proj.weight.data,
            out_proj_bias=None if self.out_proj.bias is None else self.out_proj.bias.data,
            q_proj_weight=None if self.q_proj_weight is None else self.q_proj_weight.data,
            k_proj_weight=None if self.k_proj_weight is None else self.k_proj_weight.data,
            v_proj_weight=None if self.v_proj_weight is None else self.v_proj_weight.data,
            attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
            dropout_p=self.dropout, training=self.training, rng=self.rng, attention=self.attention,
            block_size=self.block_size)
        self.last_mask = cache.attn.dropout.mask if self.attention == "standard" else None
        if _trace.active() and self.attention == "standard":
            _trace.record_attention(self, cache)
        self._save((cache, out.shape))
        if not self.batch_first:
            out = np.swapaxes(out, 0, 1)
        weights = None
        if need_weights:
            weights = probs.mean(axis=1) if average_attn_weights else probs       # (B, S, T) or (B, H, S, T)
        return out, weights

    def backward(self, dout, sum_inputs=False):
        """dout shaped like the output -> (dquery, dkey, dvalue); accumulates every parameter's grad.

        For self-attention (the same array as query, key and value) the input's gradient is the sum of
        the three. ``sum_inputs=True`` returns that sum alone (one matrix product instead of three and
        two additions; what :class:`TransformerEncoderLayer` uses); it requires the forward to have been
        self-attention.
        """
        cache, shape = self._take()
        if not self.batch_first:
            dout = check_grad(dout, "dout", (shape[1], shape[0], shape[2]), self.dtype)
            dout = np.swapaxes(dout, 0, 1)
        dout = check_grad(dout, "dout", shape, self.dtype)
        if sum_inputs and not cache.fused:
            raise ValueError("sum_inputs=True needs a self-attention forward (the same array as query, key "
                             "and value)")
        dq, dk, dv, grads = F.multi_head_attention_backward(dout, cache, sum_inputs=sum_inputs)
        for name, g in grads.items():
            owner, _, leaf = name.rpartition(".")
            mod = self.out_proj if owner == "out_proj" else self
            # a dict lookup, not getattr: CPython's attribute cache would keep every fresh name string
            mod._parameters[leaf].accumulate(g, owned=True)
        if sum_inputs:
            return dq if self.batch_first else np.swapaxes(dq, 0, 1)
        if not self.batch_first:
            dq, dk, dv = (np.swapaxes(a, 0, 1) for a in (dq, dk, dv))
        return dq, dk, dv

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


def _activation_module(activation):
    if isinstance(activation, (ReLU, GELU)):
        return activation
    if activation == "relu":
        return ReLU()
    if activation == "gelu":
        return GELU()
    raise ValueError(f"activation must be 'relu' or 'gelu' (or an nt.ReLU/nt.GELU module), got {activation!r}")


class TransformerEncoderLayer(Module):
    """One encoder block: self-attention and feed-forward, each with residual, dropout and LayerNorm.

    The same construction, state_dict keys and maths as ``torch.nn.TransformerEncoderLayer``::

        norm_first=False (post-LN):  x = norm1(x + sa(x));        x = norm2(x + ff(x))
        norm_first=True  (pre-LN):   x = x + sa(norm1(x));        x = x + ff(norm2(x))
        sa(x) = dropout1(self_attn(x, x, x))
        ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))

    Parameters
    ----------
    d_model : int
        D.
    nhead : int
        H; D must be divisible by H.
    dim_feedforward : int
        F.
    dropout : float
    activation : {"relu", "gelu"} or an nt.ReLU/nt.GELU module
    layer_norm_eps : float
    batch_first : bool
        True (default here): (B, S, D); False: (S, B, D).
    norm_first : bool
    bias : bool
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        Initialisation and every dropout mask derive from it.
    attention : {"standard", "tiled"}
        How self-attention is computed (see :class:`MultiheadAttention`); "tiled" keeps memory linear in S.
    block_size : int
        Tile size of the tiled path.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, dtype=np.float32,
                 seed=None, attention="standard", block_size=128):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(nhead, "nhead")
        if d_model % nhead != 0:
            raise ValueError(f"d_model must be divisible by nhead, got d_model={d_model} and nhead={nhead}")
        self.dtype = _dtype_of(dtype)
        rng = as_generator(seed)
        self.d_model = d_model
        self.batch_first = bool(batch_first)
        self.norm_first = bool(norm_first)
        # The attention module always runs batch-first inside the layer; the layer transposes once.
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True,
                                            dtype=self.dtype, seed=rng, attention=attention,
                                            block_size=block_size)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=self.dtype, seed=rng)
        self.dropout = Dropout(dropout, seed=rng.spawn(1)[0])
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=self.dtype, seed=rng)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.dropout1 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.dropout2 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.activation = _activation_module(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (B, S, D) (or (S, B, D) when not batch_first) -> same shape.

        ``src_mask``: (S, S) or (B*H, S, S), bool (True = may not attend) or float (added);
        ``src_key_padding_mask``: (B, S), True = ignore that key; ``is_causal``: causal mask when
        ``src_mask`` is None (a hint otherwise, as torch).
        """
        self._cache = None               # a forward that raises must not leave an old cache behind
        bf = "(B, S, D)" if self.batch_first else "(S, B, D)"
        x = check_float_input(src, "src", self.dtype, ndim=3, last_dim=self.d_model, shape_doc=bf)
        if not self.batch_first:
            x = np.swapaxes(x, 0, 1)                                             # (B, S, D)
        if x.shape[0] == 0 or x.shape[1] == 0:
            raise ValueError(f"src must have a non-empty batch and sequence, got shape {src.shape}")
        h = self.self_attn.num_heads
        check_mask(src_key_padding_mask, "src_key_padding_mask", [x.shape[:2]], self.dtype)
        check_mask(src_mask, "src_mask", [(x.shape[1],) * 2, (x.shape[0] * h,) + (x.shape[1],) * 2], self.dtype)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        self._save(x.shape)
        return x if self.batch_first else np.swapaxes(x, 0, 1)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)          # (B, S, D)
        return self.dropout1(out)

    def _sa_block_backward(self, dout):
        # x fed query, key and value: their three gradients add (summed inside, in one product)
        return self.self_attn.backward(self.dropout1.backward(dout), sum_inputs=True)

    def _ff_block(self, x):
        h = self.dropout(self.activation(self.linear1(x)))                       # (B, S, F)
        return self.dropout2(self.linear2(h))                                    # (B, S, D)

    def _ff_block_backward(self, dout):
        dh = self.linear2.backward(self.dropout2.backward(dout))                 # (B, S, F)
        return self.linear1.backward(self.activation.backward(self.dropout.backward(dh)))  # (B, S, D)

    def backward(self, dout):
        """dout shaped like the output -> d src; accumulates every parameter's gradient.

        A residual ``y = x + f(x)`` passes ``dout`` straight to ``x`` *and* through ``f``: the two
        gradients add. Post-LN goes through each norm's backward first.
        """
        shape = self._take()
        if not self.batch_first:
            dout = np.swapaxes(check_grad(dout, "dout", (shape[1], shape[0], shape[2]), self.dtype), 0, 1)
        dy = check_grad(dout, "dout", shape, self.dtype)                          # (B, S, D)
        if self.norm_first:
            dh = dy + self.norm2.backward(self._ff_block_backward(dy))           # through x + ff(norm2(x))
            dx = dh + self.norm1.backward(self._sa_block_backward(dh))           # through x + sa(norm1(x))
        else:
            dh = self.norm2.backward(dy)                                         # y = norm2(h + ff(h))
            dh = dh + self._ff_block_backward(dh)
            dx = self.norm1.backward(dh)                                         # h = norm1(x + sa(x))
            dx = dx + self._sa_block_backward(dx)
        return dx if self.batch_first else np.swapaxes(dx, 0, 1)


def _reseed(module, seed_sequence):
    """Give every generator-holding sub-module a fresh generator spawned from ``seed_sequence``."""
    for m in module.modules():
        if hasattr(m, "rng") and isinstance(m.__dict__.get("rng"), np.random.Generator):
            object.__setattr__(m, "rng", np.random.default_rng(seed_sequence.spawn(1)[0]))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer`` and an optional final norm, as torch.

    Like ``torch.nn.TransformerEncoder``, every layer starts with the *same* weights (copies of the
    template); each copy gets its own dropout generator (spawned from ``seed``) so masks differ
    between layers.

    Parameters
    ----------
    encoder_layer : TransformerEncoderLayer
    num_layers : int
    norm : LayerNorm, optional
    enable_nested_tensor, mask_check : bool
        Accepted for torch compatibility; they only affect torch's fast inference path.
    seed : int or numpy.random.Generator, optional
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True,
                 seed=None):
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"encoder_layer must be an nt.TransformerEncoderLayer, got {type(encoder_layer).__name__}")
        check_positive_int(num_layers, "num_layers")
        ss = np.random.SeedSequence(seed if not isinstance(seed, np.random.Generator)
                                    else int(seed.integers(2**63)))
        layers = []
        for _ in range(num_layers):
            layer = copy.deepcopy(encoder_layer)
            _reseed(layer, ss)
            layers.append(layer)
        self.layers = ModuleList(layers)
        self.num_layers = num_layers
        if norm is not None and not isinstance(norm, LayerNorm):
            raise TypeError(f"norm must be an nt.LayerNorm or None, got {type(norm).__name__}")
        self.norm = norm
        self.batch_first = encoder_layer.batch_first

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """src (B, S, D) -> (B, S, D). ``is_causal=None`` detects a causal ``mask`` (as torch)."""
        self._cache = None
        # Validate here so that the messages name this method's arguments (``mask``, not ``src_mask``).
        layer = self.layers[0]
        bf = "(B, S, D)" if self.batch_first else "(S, B, D)"
        src = check_float_input(src, "src", layer.dtype, ndim=3, last_dim=layer.d_model, shape_doc=bf)
        b, s = (src.shape[0], src.shape[1]) if self.batch_first else (src.shape[1], src.shape[0])
        check_mask(src_key_padding_mask, "src_key_padding_mask", [(b, s)], layer.dtype)
        check_mask(mask, "mask", [(s, s), (b * layer.self_attn.num_heads, s, s)], layer.dtype)
        if is_causal is None:
            is_causal = _is_causal_mask(mask)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        if self.norm is not None:
            x = self.norm(x)
        self._save(True)
        return x

    def backward(self, dout):
        """dout (B, S, D) -> d src; accumulates every layer's parameter gradients."""
        self._take()
        if self.norm is not None:
            dout = self.norm.backward(dout)
        for layer in reversed(list(self.layers)):
            dout = layer.backward(dout)
        return dout


def _is_causal_mask(mask):
    if mask is None:
        return False
    mask = np.asarray(mask)
    if mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
        return False
    causal = F.causal_mask(mask.shape[0])
    if mask.dtype == np.bool_:
        return bool(np.array_equal(mask, causal))
    return bool(np.all(np.isneginf(mask[causal])) and np.all(mask[~causal] == 0))


class TokenEmbedding(Module):
    """The seed design's token embedding: ``embedding(ids) * sqrt(d_model)``.

    Weights are drawn from N(0, 1/d_model) so the scaled output has unit variance (the seed design's
    health check: embedding std near 1).

    Parameters
    ----------
    vocab_size : int
        V.
    d_model : int
        D.
    dtype, seed : see :class:`Linear`
    """

    def __init__(self, vocab_size, d_model, dtype=np.float32, seed=None):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.dtype = _dtype_of(dtype)
        self.embedding = Embedding(vocab_size, d_model, dtype=self.dtype, seed=seed)
        self.embedding.weight.data *= self.dtype.type(1.0 / math.sqrt(d_model))
        self.scale = self.dtype.type(math.sqrt(d_model))

    def forward(self, ids):
        """ids (B, S) -> (B, S, D)."""
        return self.embedding(ids) * self.scale                                  # (B, S, D)

    def backward(self, dout):
        """``y = E[ids] * sqrt(D)``: the gradient reaching the table is ``dout * sqrt(D)``."""
        return self.embedding.backward(dout * self.scale)


def sinusoidal_table(max_len, d_model, dtype=np.float64):
    """The fixed table ``pe[pos, 2i] = sin(pos / 10000^(2i/D))``, ``pe[pos, 2i+1] = cos(same)``: (max_len, D)."""
    position = np.arange(max_len, dtype=np.float64)[:, None]                     # (max_len, 1)
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))  # (ceil(D/2),)
    pe = np.zeros((max_len, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(position * div_term)                                    # even columns
    pe[:, 1::2] = np.cos(position * div_term[: d_model // 2])                    # odd columns
    return pe.astype(dtype)


class PositionalEncoding(Module):
    """Adds the fixed sinusoidal table: ``y = x + pe[:S]``. ``pe`` is a buffer (not in ``state_dict``,
    never a parameter, never given a gradient).

    Parameters
    ----------
    d_model : int
    max_len : int
        The longest sequence accepted; longer input raises ValueError.
    dtype : np.float32 or np.float64
    """

    def __init__(self, d_model, max_len=5000, dtype=np.float32):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.max_len = check_positive_int(max_len, "max_len")
        self.dtype = _dtype_of(dtype)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, self.dtype), persistent=False)

    def forward(self, x):
        """x (B, S, D) -> (B, S, D)."""
        x = check_float_input(x, "x", self.dtype, ndim=3, last_dim=self.d_model, shape_doc="(B, S, D)")
        s = x.shape[1]
        if s > self.max_len:
            raise ValueError(f"sequence length {s} exceeds PositionalEncoding max_len={self.max_len}; "
                             "build the model with a larger max_len")
        self._save(x.shape)
        return x + self.pe[:s]                                                   # (B, S, D) + (S, D)

    def backward(self, dout):
        """``y = x + pe``: pe is a constant, so ``dx = dout`` and the table gets nothing."""
        shape = self._take()
        return check_grad(dout, "dout", shape, self.dtype)


def dropout_masks(module):
    """``{module name: keep-mask}`` for every dropout (and attention dropout) that used one in the
    last forward; feed it to ``reference_torch`` to replay the same masks."""
    return {name: m.last_mask for name, m in module.named_modules()
            if getattr(m, "last_mask", None) is not None}
