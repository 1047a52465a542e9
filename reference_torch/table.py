"""The one torch table: for every case of ``numpy_transformer.testing``, torch's own implementation.

* :data:`OPS` -- op name -> a function of tensors computing the op with torch (masks arrive in the
  convention of torch's function of the same name -- ``scaled_dot_product_attention``: bool True =
  takes part; ``multi_head_attention_forward`` and the modules: bool True = masked out -- and are passed
  to it unchanged). A regular op's case names torch's function itself (``OpCase.torch``, a dotted
  string, with ``OpCase.torch_args`` mapping the arguments): :func:`torch_op` resolves it with importlib,
  and it needs no entry here. Only the irregular ops have an adapter, in :data:`ADAPTERS` (torch has no
  such function, or it needs more than its arguments renamed). :func:`op_outputs` runs one under
  autograd with a given upstream gradient.
* :data:`MODULES` -- module class name -> how to build torch's module for one of ours (``torch.nn``'s
  own where torch has it, the hand-written twin of :mod:`reference_torch.nn` otherwise or when
  ``oracle="twin"``); :func:`torch_module` builds it and copies the weights in through ``state_dict``.
* :func:`torch_call` runs a registry module case on the torch side (masks as tensors; ``torch.nn``
  wants the causal mask itself where we accept ``is_causal=True`` alone).

Adding a regular op: nothing here (its registry case names torch's function); an irregular one: its
adapter in :data:`ADAPTERS`. Its module: one entry in :data:`MODULES`.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import torch
import torch.nn.functional as TF
from torch import nn

from numpy_transformer import testing
from numpy_transformer.nn.block import GATED_FFNS
from numpy_transformer.testing.modules import call as call_case

from .convert import to_torch, torch_dtype
from .models.gpt import GPT
from .nn import decoder, seq2seq
from .nn.activations import activation
from .nn.attention import MultiheadAttention
from .nn.block import block_like
from .nn.decoder import DECODER_KINDS, fill_causal_masks
from .nn.feedforward import gated_like
from .nn.gqa import attention_like
from .nn.layers import Dropout, LearnedPositionalEmbedding, PositionalEncoding, TokenEmbedding
from .nn.position_bias import RelativePositionBias
from .nn.rotary import RotaryEmbedding, rope
from .nn.transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = ["OPS", "ADAPTERS", "MODULES", "TORCH_VERSION", "resolve", "torch_op", "op_outputs", "torch_module", "twin",
           "torch_call", "module_outputs", "to_tensor"]

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
# ops: the irregular ones' adapters; the regular ones named by their registry cases
# --------------------------------------------------------------------------------------------------

def _flash(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False, **_tiles):
    """torch's scaled_dot_product_attention for our tiled attention, which also takes a mask together
    with ``is_causal`` (torch's function refuses both): that one case is merged into the mask here."""
    if attn_mask is not None and is_causal:
        allowed = ~_causal_bool(query.shape[-2], key.shape[-2])
        attn_mask = attn_mask & allowed if attn_mask.dtype == torch.bool else attn_mask.masked_fill(~allowed, -math.inf)
        is_causal = False
    return TF.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
                                           enable_gqa=enable_gqa)


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


ADAPTERS = {
    "embedding": _embedding,
    "dropout": _dropout,
    "flash_attention": _flash,                       # the same maths, tiled: torch's SDPA is the oracle
    "flash_attention_gqa": _flash,                   # enable_gqa=True arrives in the static options
    "multi_head_attention": _mha,
    "rope": rope,                                    # torch has no RoPE: HF's rotate_half, Meta's complex twin
    # T5's lookup W[buckets] -> (H, S, T): torch's embedding of the (query, key) pairs' buckets
    "relative_position_bias": lambda weight, buckets: TF.embedding(buckets, weight).permute(2, 0, 1),
}


def resolve(dotted):
    """The object a dotted name names (``"torch.nn.functional.layer_norm"``): the longest prefix that
    imports as a module (importlib), then attributes. Raises ``LookupError`` naming what is missing."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[n:], n):
            if not hasattr(obj, attr):
                raise LookupError(f"{dotted!r}: {'.'.join(parts[:i])} has no attribute {attr!r}")
            obj = getattr(obj, attr)
        return obj
    raise LookupError(f"{dotted!r}: no module {parts[0]!r} to import")


def _gated(name, act):
    """A gated feed-forward in torch, as Hugging Face's ``LlamaMLP``: ``down(act(gate(x)) * up(x))``, the
    registry case naming ``act`` (``OpCase.gated``); the op's static options go to ``act``."""
    def op(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, **act_options):
        return TF.linear(act(TF.linear(x, w_gate, b_gate), **act_options) * TF.linear(x, w_up, b_up), w_down, b_down)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``down({act.__name__}(gate(x)) * up(x))`` for the gated registry op {name!r}."
    return op


def torch_op(name):
    """Torch's function for registry op ``name``, called with our keyword arguments (tensors): the
    function its case names (``OpCase.torch``, arguments mapped by ``OpCase.torch_kwargs``), or the
    op's adapter in :data:`ADAPTERS` when the case names none."""
    if name not in testing.OPS:
        raise KeyError(f"no op {name!r} in the registry (numpy_transformer.testing.OPS)")
    case = testing.OPS[name]
    if case.torch is None:
        if name not in ADAPTERS:
            raise LookupError(f"op {name!r} has no torch side: its registry case names no torch function "
                              "(OpCase.torch) and reference_torch.table.ADAPTERS has no adapter for it")
        return ADAPTERS[name]
    fn = resolve(case.torch)
    if not callable(fn):
        raise TypeError(f"op {name!r}: OpCase.torch={case.torch!r} names a {type(fn).__name__}, not a function")
    if case.gated:
        return _gated(name, fn)

    def op(**kwargs):
        return fn(**case.torch_kwargs(kwargs))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``{case.torch}`` with registry op {name!r}'s arguments mapped (OpCase.torch_kwargs)."
    return op


OPS = {name: torch_op(name) for name in testing.OPS}


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
    cls = TransformerEncoderLayer if twin else nn.TransformerEncoderLayer
    return cls(m.d_model, m.self_attn.num_heads, dim_feedforward=m.linear1.out_features, dropout=m.dropout.p,
               activation=activation(m.activation),
               layer_norm_eps=m.norm1.eps, batch_first=m.batch_first, norm_first=m.norm_first,
               bias=m.linear1.bias is not None)


def _mha_module(m, twin=False):
    cls = MultiheadAttention if twin else nn.MultiheadAttention
    return cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None,
               add_bias_kv=m.bias_k is not None, add_zero_attn=m.add_zero_attn, kdim=m.kdim, vdim=m.vdim,
               batch_first=m.batch_first)


def _encoder(m, twin=False):
    norm = None if m.norm is None else MODULES["LayerNorm"](m.norm, twin)
    if twin:
        return TransformerEncoder([_layer(layer, twin=True) for layer in m.layers], norm)
    return nn.TransformerEncoder(_layer(m.layers[0]), m.num_layers, norm=norm, enable_nested_tensor=False)


MODULES = {
    "Linear": lambda m, twin=False: nn.Linear(m.in_features, m.out_features, bias=m.bias is not None),
    "Embedding": lambda m, twin=False: nn.Embedding(m.num_embeddings, m.embedding_dim, padding_idx=m.padding_idx,
                                                    max_norm=m.max_norm, norm_type=m.norm_type,
                                                    scale_grad_by_freq=m.scale_grad_by_freq),
    "LayerNorm": lambda m, twin=False: nn.LayerNorm(m.normalized_shape, eps=m.eps,
                                                    elementwise_affine=m.elementwise_affine, bias=m.bias is not None),
    "RMSNorm": lambda m, twin=False: nn.RMSNorm(m.normalized_shape, eps=m.eps, elementwise_affine=m.elementwise_affine),
    "Dropout": lambda m, twin=False: Dropout(m.p),
    "MultiheadAttention": _mha_module,
    "TransformerEncoderLayer": _layer,
    "TransformerEncoder": _encoder,
    # torch has no such classes: the twins are the oracle (their sub-modules are torch.nn's)
    "TokenEmbedding": lambda m, twin=False: TokenEmbedding(m.embedding.num_embeddings, m.d_model),
    "PositionalEncoding": lambda m, twin=False: PositionalEncoding(m.d_model, m.max_len),
    "RotaryEmbedding": lambda m, twin=False: RotaryEmbedding(m.dim, m.base, m.interleaved),
    "LearnedPositionalEmbedding": lambda m, twin=False: LearnedPositionalEmbedding(m.max_len, m.d_model),
    "SiLU": lambda m, twin=False: nn.SiLU(),
    # torch has no GPT: the twin, with torch.nn.TransformerEncoderLayer blocks (or the block twins)
    "GPT": lambda m, twin=False: GPT(m.config, twin=twin),
    # torch has no such modules: torch's own scaled_dot_product_attention(enable_gqa=True) ("torch.nn")
    # or the textbook repeat_interleave twin ("twin"), built from torch.nn's Linear and norms
    "GroupedQueryAttention": lambda m, twin=False: attention_like(m, twin),
    "TransformerBlock": lambda m, twin=False: block_like(m, twin),
    # torch has no T5 bias: the twin transcribes Hugging Face's T5Attention (relative_attention_bias, compute_bias)
    "RelativePositionBias": lambda m, twin=False: RelativePositionBias(m.num_heads, m.num_buckets, m.max_distance,
                                                                          m.bidirectional),
}
# the gated feed-forwards (nt.SwiGLU ...), every class of the library's vocabulary: one twin for all
MODULES.update({cls.__name__: lambda m, twin=False: gated_like(m) for cls in GATED_FFNS.values()})
# TransformerDecoderLayer, TransformerDecoder, Transformer (their parts built by this table)
for _twins in (decoder, seq2seq):
    MODULES.update(_twins.torch_modules(lambda m, twin: MODULES[type(m).__name__](m, twin)))


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
    other = {k: (torch.from_numpy(np.array(v, copy=True)) if isinstance(v, np.ndarray) else v)
             for k, v in other.items()}
    if cfg["kind"] in DECODER_KINDS:
        if oracle == "torch.nn":
            fill_causal_masks(cfg["kind"], list(x.values()), other, cfg["batch_first"])
        return call_case(module, cfg, x, other)
    if oracle == "torch.nn" and other.get("is_causal") and other.get("attn_mask") is None:
        s, t = cfg["S"], cfg["T"]
        other["attn_mask"] = _causal_bool(s, t)
    return call_case(module, cfg, x, other)


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
    fill_causal_masks(name, targs, tkw, getattr(np_module, "batch_first", True))
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
    :mod:`reference_torch.nn` for the rest (:func:`torch_module` with ``oracle="twin"``)."""
    return torch_module(np_module, "twin")
