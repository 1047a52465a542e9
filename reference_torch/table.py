"""The one torch table: for every case of ``numpy_transformer.testing``, torch's own implementation.

* :data:`OPS` -- op name -> a function of tensors computing the op with ``torch.nn.functional``
  (masks arrive in the convention of torch's function of the same name -- ``scaled_dot_product_attention``:
  bool True = takes part; ``multi_head_attention_forward`` and the modules: bool True = masked out --
  and are passed to it unchanged);
  :func:`op_outputs` runs one under autograd with a given upstream gradient.
* :data:`MODULES` -- module class name -> how to build torch's module for one of ours (``torch.nn``'s
  own where torch has it, the hand-written twin of :mod:`reference_torch.modules` otherwise or when
  ``oracle="twin"``); :func:`torch_module` builds it and copies the weights in through ``state_dict``.
* :func:`torch_call` runs a registry module case on the torch side (masks as tensors; ``torch.nn``
  wants the causal mask itself where we accept ``is_causal=True`` alone).

Adding an op: one entry in :data:`OPS` and, for its module, one in :data:`MODULES`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as TF
from torch import nn

from . import block as RB
from . import decoder as RD
from . import feedforward as RF
from . import gpt as RG
from . import modules as R
from . import rope as RR
from . import position_bias as RP
from .convert import to_torch, torch_dtype

__all__ = ["OPS", "MODULES", "TORCH_VERSION", "op_outputs", "torch_module", "twin", "torch_call", "module_outputs",
           "to_tensor"]

TORCH_VERSION = torch.__version__


def to_tensor(a, dtype, requires_grad=False):
    """A NumPy array as a tensor: floats in ``dtype`` (a torch dtype), ints as int64, bools as bool."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return torch.from_numpy(a.copy())
    if a.dtype.kind in "iu":
        return torch.from_numpy(a.astype(np.int64))
    return torch.from_numpy(np.array(a, dtype=np.float64)).to(dtype).requires_grad_(requires_grad)


def _causal_bool(s, t):
    """(S, T) bool, True above the diagonal (top-left aligned, as torch's ``is_causal``)."""
    return torch.triu(torch.ones(s, t, dtype=torch.bool), diagonal=1)


# --------------------------------------------------------------------------------------------------
# ops: torch.nn.functional, with our mask convention translated
# --------------------------------------------------------------------------------------------------

def _sdpa(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """torch's scaled_dot_product_attention, the mask passed unchanged (the same convention as ours)."""
    return TF.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
                                           enable_gqa=enable_gqa)


def _flash(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False, **_tiles):
    """torch's scaled_dot_product_attention for our tiled attention, which also takes a mask together
    with ``is_causal`` (torch's function refuses both): that one case is merged into the mask here."""
    if attn_mask is not None and is_causal:
        allowed = ~_causal_bool(query.shape[-2], key.shape[-2])
        attn_mask = attn_mask & allowed if attn_mask.dtype == torch.bool else attn_mask.masked_fill(~allowed, -math.inf)
        is_causal = False
    return _sdpa(query, key, value, attn_mask, is_causal, scale, enable_gqa)


def _mha(x=None, query=None, key=None, value=None, num_heads=1, attn_mask=None, key_padding_mask=None,
         is_causal=False, need_weights=False, average_attn_weights=True, add_zero_attn=False, **w):
    """torch.nn.functional.multi_head_attention_forward on batch-first inputs (it wants (S, B, D))."""
    if x is not None:
        query = key = value = x
    s, t, d = query.shape[1], key.shape[1], query.shape[-1]
    if is_causal and attn_mask is None:
        attn_mask = _causal_bool(s, t)             # torch needs the mask itself; is_causal is a hint
    out, weights = TF.multi_head_attention_forward(
        query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), d, num_heads,
        w.get("in_proj_weight"), w.get("in_proj_bias"), w.get("bias_k"), w.get("bias_v"), add_zero_attn, 0.0,
        w["out_proj_weight"],
        w.get("out_proj_bias"), training=True, key_padding_mask=key_padding_mask, need_weights=need_weights,
        attn_mask=attn_mask, use_separate_proj_weight="in_proj_weight" not in w, q_proj_weight=w.get("q_proj_weight"),
        k_proj_weight=w.get("k_proj_weight"), v_proj_weight=w.get("v_proj_weight"),
        average_attn_weights=average_attn_weights, is_causal=is_causal)
    return out.transpose(0, 1), ({"weights": weights} if need_weights else {})


def _embedding(ids, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False):
    """torch's embedding; with ``max_norm`` it renormalises ``weight`` in place (under no_grad), and the
    renormed table is returned too, as ``weight_after`` (the registry's op returns it)."""
    out = TF.embedding(ids, weight, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                       scale_grad_by_freq=scale_grad_by_freq)
    return out if max_norm is None else (out, {"weight_after": weight.detach().clone()})


def _dropout(x, p, mask, training=True):
    # torch's dropout draws its own mask; with a fixed keep-mask, inverted dropout is x * mask / (1-p)
    if not training or p == 0.0:
        return x
    return x * (mask.to(x.dtype) * (0.0 if p == 1.0 else 1.0 / (1.0 - p)))


OPS = {
    "linear": lambda x, weight, bias=None: TF.linear(x, weight, bias),
    "embedding": _embedding,
    "layer_norm": lambda x, weight=None, bias=None, eps=1e-5, normalized_shape=None: TF.layer_norm(
        x, tuple(normalized_shape) if normalized_shape is not None else tuple(next(
            (p.shape for p in (weight, bias) if p is not None), x.shape[-1:])), weight, bias, eps),
    "rms_norm": lambda x, weight=None, eps=None, normalized_shape=None: TF.rms_norm(
        x, tuple(normalized_shape) if weight is None else tuple(weight.shape), weight, eps),
    "softmax": lambda x, axis=-1: TF.softmax(x, dim=axis),
    "relu": lambda x: TF.relu(x),
    "gelu": lambda x, approximate="none": TF.gelu(x, approximate=approximate),
    "silu": lambda x: TF.silu(x),
    # SwiGLU, as Hugging Face's LlamaMLP: down(silu(gate(x)) * up(x))
    "swiglu": lambda x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None: TF.linear(
        TF.silu(TF.linear(x, w_gate, b_gate)) * TF.linear(x, w_up, b_up), w_down, b_down),
    "dropout": _dropout,
    "scaled_dot_product_attention": _sdpa,
    "flash_attention": _flash,                       # the same maths, tiled: torch's SDPA is the oracle
    "scaled_dot_product_attention_gqa": _sdpa,       # enable_gqa=True arrives in the static options
    "flash_attention_gqa": _flash,
    "multi_head_attention": _mha,
    "rope": RR.rope,                                 # torch has no RoPE: HF's rotate_half, Meta's complex twin
    # T5's lookup W[buckets] -> (H, S, T): torch's embedding of the (query, key) pairs' buckets
    "relative_position_bias": lambda weight, buckets: TF.embedding(buckets, weight).permute(2, 0, 1),
    "cross_entropy": lambda input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0:
        TF.cross_entropy(input, target, weight, ignore_index=ignore_index, reduction=reduction,
                         label_smoothing=label_smoothing),
}


def op_outputs(name, inputs, static, dout, dtype=np.float64, nondiff=()):
    """Torch's ``{"out": ..., extras..., input name: gradient}`` for op ``name`` of the torch table.

    ``inputs`` are NumPy arrays (float ones, unless in ``nondiff``, are differentiated in ``dtype``),
    ``static`` the constants (arrays become tensors), ``dout`` the upstream gradient. Tensors are
    returned (``float64`` arrays are what ``numpy_transformer`` compares with).
    """
    dt = torch_dtype(dtype) if not isinstance(dtype, torch.dtype) else dtype
    t = {n: None if a is None else to_tensor(a, dt, requires_grad=np.asarray(a).dtype.kind == "f" and n not in nondiff)
         for n, a in inputs.items()}
    s = {n: (to_tensor(a, dt) if isinstance(a, np.ndarray) else a) for n, a in static.items()}
    res = OPS[name](**t, **s)
    out, extras = res if isinstance(res, tuple) else (res, {})
    out.backward(to_tensor(dout, dt))
    grads = {n: v.grad for n, v in t.items() if v is not None and v.requires_grad}
    return {"out": out, **extras, **grads}


# --------------------------------------------------------------------------------------------------
# modules: one builder for torch's module equivalent to any of ours
# --------------------------------------------------------------------------------------------------

def _layer(m, twin=False):
    cls = R.TransformerEncoderLayer if twin else nn.TransformerEncoderLayer
    return cls(m.d_model, m.self_attn.num_heads, dim_feedforward=m.linear1.out_features, dropout=m.dropout.p,
               activation=R.activation(m.activation),
               layer_norm_eps=m.norm1.eps, batch_first=m.batch_first, norm_first=m.norm_first,
               bias=m.linear1.bias is not None)


def _mha_module(m, twin=False):
    cls = R.MultiheadAttention if twin else nn.MultiheadAttention
    return cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None,
               add_bias_kv=m.bias_k is not None, add_zero_attn=m.add_zero_attn, kdim=m.kdim, vdim=m.vdim,
               batch_first=m.batch_first)


def _encoder(m, twin=False):
    norm = None if m.norm is None else MODULES["LayerNorm"](m.norm, twin)
    if twin:
        return R.TransformerEncoder([_layer(layer, twin=True) for layer in m.layers], norm)
    return nn.TransformerEncoder(_layer(m.layers[0]), m.num_layers, norm=norm, enable_nested_tensor=False)


MODULES = {
    "Linear": lambda m, twin=False: nn.Linear(m.in_features, m.out_features, bias=m.bias is not None),
    "Embedding": lambda m, twin=False: nn.Embedding(m.num_embeddings, m.embedding_dim, padding_idx=m.padding_idx,
                                                    max_norm=m.max_norm, norm_type=m.norm_type,
                                                    scale_grad_by_freq=m.scale_grad_by_freq),
    "LayerNorm": lambda m, twin=False: nn.LayerNorm(m.normalized_shape, eps=m.eps,
                                                    elementwise_affine=m.elementwise_affine, bias=m.bias is not None),
    "RMSNorm": lambda m, twin=False: nn.RMSNorm(m.normalized_shape, eps=m.eps, elementwise_affine=m.elementwise_affine),
    "Dropout": lambda m, twin=False: R.Dropout(m.p),
    "MultiheadAttention": _mha_module,
    "TransformerEncoderLayer": _layer,
    "TransformerEncoder": _encoder,
    # torch has no such classes: the twins are the oracle (their sub-modules are torch.nn's)
    "TokenEmbedding": lambda m, twin=False: R.TokenEmbedding(m.embedding.num_embeddings, m.d_model),
    "PositionalEncoding": lambda m, twin=False: R.PositionalEncoding(m.d_model, m.max_len),
    "RotaryEmbedding": lambda m, twin=False: RR.RotaryEmbedding(m.dim, m.base, m.interleaved),
    "LearnedPositionalEmbedding": lambda m, twin=False: R.LearnedPositionalEmbedding(m.max_len, m.d_model),
    "SiLU": lambda m, twin=False: nn.SiLU(),
    "SwiGLU": lambda m, twin=False: RF.SwiGLU(m.d_model, m.hidden_dim, bias=m.gate_proj.bias is not None),
    # torch has no GPT: the twin, with torch.nn.TransformerEncoderLayer blocks (or the block twins)
    "GPT": lambda m, twin=False: RG.GPT(m.config, twin=twin),
    # torch has no such modules: torch's own scaled_dot_product_attention(enable_gqa=True) ("torch.nn")
    # or the textbook repeat_interleave twin ("twin"), built from torch.nn's Linear and norms
    "GroupedQueryAttention": lambda m, twin=False: RB.attention_like(m, twin),
    "TransformerBlock": lambda m, twin=False: RB.block_like(m, twin),
    # torch has no T5 bias: the twin transcribes Hugging Face's T5Attention (relative_attention_bias, compute_bias)
    "RelativePositionBias": lambda m, twin=False: RP.RelativePositionBias(m.num_heads, m.num_buckets, m.max_distance,
                                                                          m.bidirectional),
}
# TransformerDecoderLayer, TransformerDecoder, Transformer (their parts built by this table)
MODULES.update(RD.torch_modules(lambda m, twin: MODULES[type(m).__name__](m, twin)))


def torch_module(np_module, oracle="torch.nn", dtype=None):
    """Torch's module equivalent to ``np_module``, with its weights copied in and its train/eval mode.

    ``oracle``: ``"torch.nn"`` (torch's own modules) or ``"twin"`` (the hand-written twins, which can
    replay our dropout masks). ``dtype`` (NumPy), default the module's own.
    """
    name = type(np_module).__name__
    if name not in MODULES:
        raise TypeError(f"no torch module for {name} in reference_torch.table.MODULES")
    if oracle not in ("torch.nn", "twin"):
        raise ValueError(f"oracle must be 'torch.nn' or 'twin', got {oracle!r}")
    tm = MODULES[name](np_module, oracle == "twin")
    if dtype is None:
        params = np_module.parameters()
        dtype = getattr(np_module, "dtype", None)
        dtype = dtype if dtype is not None else (params[0].dtype if params else np.float64)
    tm = tm.to(torch_dtype(np.dtype(dtype)))
    to_torch(np_module, tm, cast=True)
    return tm.train(np_module.training)


def torch_call(module, cfg, x, other, oracle="torch.nn"):
    """Run registry module case ``cfg`` on a torch module: NumPy masks become tensors (unchanged: the
    modules' convention is torch's), and for ``torch.nn`` an ``is_causal=True`` without a mask gets the
    causal mask too (torch wants both)."""
    from numpy_transformer.testing.modules import call
    other = {k: (torch.from_numpy(np.array(v, copy=True)) if isinstance(v, np.ndarray) else v)
             for k, v in other.items()}
    if cfg["kind"] in RD.DECODER_KINDS:
        if oracle == "torch.nn":
            RD.fill_causal_masks(cfg["kind"], list(x.values()), other, cfg["batch_first"])
        return call(module, cfg, x, other)
    if oracle == "torch.nn" and other.get("is_causal") and other.get("attn_mask") is None:
        s, t = cfg["S"], cfg["T"]
        other["attn_mask"] = _causal_bool(s, t)
    return call(module, cfg, x, other)


# the keyword holding each module's attention mask
_MASK_KWARG = {"MultiheadAttention": "attn_mask", "TransformerEncoderLayer": "src_mask", "TransformerEncoder": "mask"}


def module_outputs(np_module, args, kwargs, input_names, dout, dtype=np.float64):
    """Torch autograd on torch's module for ``np_module`` (eval mode, weights copied, in ``dtype``):
    ``{"out": ..., input name: gradient, parameter name: gradient}`` for
    ``sum(dout * module(*args, **kwargs))`` (``args``/``kwargs`` NumPy, masks in our convention)."""
    dt = torch_dtype(dtype)
    tm = torch_module(np_module, "torch.nn", dtype).eval()
    targs = [to_tensor(a, dt, requires_grad=np.asarray(a).dtype.kind == "f") for a in args]
    tkw = {k: (to_tensor(v, dt) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    name = type(np_module).__name__
    RD.fill_causal_masks(name, targs, tkw, getattr(np_module, "batch_first", True))
    mask_kw = _MASK_KWARG.get(name)
    if mask_kw and tkw.get("is_causal") and tkw.get(mask_kw) is None:
        q = targs[0]
        seq = 0 if q.dim() == 2 else (1 if getattr(np_module, "batch_first", True) else 0)
        k = targs[1] if name == "MultiheadAttention" else q
        tkw[mask_kw] = _causal_bool(q.shape[seq], k.shape[seq])     # torch wants the mask with the hint
    if tkw.get("is_causal") and (getattr(np_module, "bias_k", None) is not None
                                 or getattr(np_module, "add_zero_attn", False)):
        tkw["is_causal"] = False          # torch's hint path would mask the appended keys (see torch_call)
    if name == "MultiheadAttention":
        tkw["need_weights"] = False
    out = tm(*targs, **tkw)
    out = out[0] if isinstance(out, tuple) else out
    out.backward(to_tensor(dout, dt))
    res = {"out": out}
    res.update({n: t.grad for n, t in zip(input_names, targs) if t.is_floating_point()})
    res.update({n: p.grad for n, p in tm.named_parameters()})
    return res


def twin(np_module):
    """The PyTorch module matching ``np_module`` (same configuration, weights copied, same train/eval
    mode): ``torch.nn.Linear``/``Embedding``/``LayerNorm`` for the leaves, the hand-written twins of
    :mod:`reference_torch.modules` for the rest (:func:`torch_module` with ``oracle="twin"``)."""
    return torch_module(np_module, "twin")
