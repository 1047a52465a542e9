"""Torch autograd's gradients of ``L = sum(dout * f(x))`` for the ops and modules that
``numpy-transformer gradcheck`` checks: the torch half of that command.

Everything here calls PyTorch's own implementations (``torch.nn.functional`` and ``torch.nn``
modules, with ``numpy_transformer``'s weights copied in through ``state_dict``), never our NumPy code,
so an agreement is an independent confirmation. ``numpy_transformer.cli.gradcheck`` imports this module
lazily (``numpy_transformer`` itself never imports torch).

Masks follow ``numpy_transformer``'s convention (bool True = may NOT attend, float = added) on the way
in; they are translated here to what each torch function expects.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["TORCH_VERSION", "functional_grads", "module_grads", "torch_module_like"]

TORCH_VERSION = torch.__version__

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _dt(dtype):
    return _DTYPES[np.dtype(dtype).name]


def _tensor(a, dtype, requires_grad=False):
    """A NumPy array as a tensor: floats in ``dtype``, ints as int64, bools as bool."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return torch.from_numpy(a.copy())
    if a.dtype.kind in "iu":
        return torch.from_numpy(a.astype(np.int64))
    t = torch.from_numpy(np.array(a, dtype=np.float64)).to(dtype)
    return t.requires_grad_(requires_grad)


def _grad(t):
    return None if t.grad is None else t.grad.detach().cpu().numpy().astype(np.float64)


def _causal_bool(s, t):
    """(S, T) bool, True above the diagonal (top-left aligned, as torch's ``is_causal``)."""
    return torch.triu(torch.ones(s, t, dtype=torch.bool), diagonal=1)


# --------------------------------------------------------------------------------------------------
# functional ops
# --------------------------------------------------------------------------------------------------

def _sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, dtype=torch.float64):
    """torch's scaled_dot_product_attention with our mask convention translated."""
    if attn_mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    m = _tensor(attn_mask, dtype)
    if not is_causal:
        # torch's sdpa: a bool mask is True where attention IS allowed (the opposite of ours).
        return F.scaled_dot_product_attention(q, k, v, attn_mask=~m if m.dtype == torch.bool else m, scale=scale)
    add = torch.zeros(m.shape, dtype=dtype).masked_fill(m, -math.inf) if m.dtype == torch.bool else m.clone()
    add = add + torch.zeros(q.shape[-2], k.shape[-2], dtype=dtype).masked_fill(
        _causal_bool(q.shape[-2], k.shape[-2]), -math.inf)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=add, scale=scale)


def _mha(t, static, dtype):
    """torch.nn.functional.multi_head_attention_forward on batch-first inputs (it wants (S, B, D))."""
    query, key, value = (t[n].transpose(0, 1) for n in ("query", "key", "value"))
    d = t["query"].shape[-1]
    s, tk = t["query"].shape[1], t["key"].shape[1]
    separate = "in_proj_weight" not in t
    attn_mask = static.get("attn_mask")
    attn_mask = None if attn_mask is None else _tensor(attn_mask, dtype)
    is_causal = bool(static.get("is_causal", False))
    if is_causal and attn_mask is None:
        attn_mask = _causal_bool(s, tk)            # torch needs the mask itself; is_causal is a hint
    kpm = static.get("key_padding_mask")
    out, _ = F.multi_head_attention_forward(
        query, key, value, d, static["num_heads"], t.get("in_proj_weight"), t.get("in_proj_bias"),
        None, None, False, 0.0, t["out_proj_weight"], t.get("out_proj_bias"), training=False,
        key_padding_mask=None if kpm is None else _tensor(kpm, dtype), need_weights=False,
        attn_mask=attn_mask, use_separate_proj_weight=separate, q_proj_weight=t.get("q_proj_weight"),
        k_proj_weight=t.get("k_proj_weight"), v_proj_weight=t.get("v_proj_weight"), is_causal=is_causal)
    return out.transpose(0, 1)


def _functional_forward(op, t, static, dtype):
    if op == "linear":
        return F.linear(t["x"], t["weight"], t.get("bias"))
    if op == "embedding":
        return F.embedding(t["ids"], t["weight"], padding_idx=static.get("padding_idx"))
    if op == "layer_norm":
        x = t["x"]
        return F.layer_norm(x, (x.shape[-1],), t.get("weight"), t.get("bias"), static.get("eps", 1e-5))
    if op == "softmax":
        return F.softmax(t["x"], dim=static.get("axis", -1))
    if op == "relu":
        return F.relu(t["x"])
    if op == "gelu":
        return F.gelu(t["x"], approximate=static.get("approximate", "none"))
    if op == "dropout":
        # torch's dropout draws its own mask; with a fixed keep-mask, inverted dropout is x * mask / (1-p).
        p = static["p"]
        keep = _tensor(static["mask"], dtype).to(dtype)
        return t["x"] * (keep * (0.0 if p == 1.0 else 1.0 / (1.0 - p)))
    if op == "scaled_dot_product_attention":
        return _sdpa(t["q"], t["k"], t["v"], static.get("attn_mask"), static.get("is_causal", False),
                     static.get("scale"), dtype)
    if op == "multi_head_attention":
        return _mha(t, static, dtype)
    raise ValueError(f"unknown op {op!r}")


def functional_grads(op, inputs, static, dout, dtype=np.float64):
    """Torch autograd's gradients of ``sum(dout * op(**inputs, **static))``.

    Parameters
    ----------
    op : str
        ``linear``, ``embedding``, ``layer_norm``, ``softmax``, ``relu``, ``gelu``, ``dropout``,
        ``scaled_dot_product_attention`` or ``multi_head_attention``.
    inputs : dict
        ``name -> ndarray``: float arrays are differentiated (in ``dtype``), integer ids are not.
        Names as ``numpy_transformer.functional``'s arguments (``x``, ``weight``, ``bias``, ``q``,
        ``query``, ``in_proj_weight``, ``out_proj_weight``...).
    static : dict
        The constant arguments: masks (our convention), ``axis``, ``approximate``, ``p`` and ``mask``
        (dropout's keep-mask), ``num_heads``, ``is_causal``, ``padding_idx``, ``eps``, ``scale``.
    dout : ndarray
        The upstream gradient (cast to ``dtype``).
    dtype : np.float32 or np.float64

    Returns
    -------
    dict
        ``name -> gradient`` (float64 ndarray holding the ``dtype`` result) for every float input.
    """
    dt = _dt(dtype)
    t = {n: _tensor(a, dt, requires_grad=np.asarray(a).dtype.kind == "f") for n, a in inputs.items()}
    out = _functional_forward(op, t, static, dt)
    (out * _tensor(dout, dt)).sum().backward()
    return {n: _grad(v) for n, v in t.items() if v.is_floating_point()}


# --------------------------------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------------------------------

class _TokenEmbedding(nn.Module):
    """``embedding(ids) * sqrt(d_model)`` (``nt.TokenEmbedding``; torch has no such class)."""

    def __init__(self, vocab, d_model):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.scale = math.sqrt(d_model)

    def forward(self, ids):
        return self.embedding(ids) * self.scale


class _PositionalEncoding(nn.Module):
    """``x + pe[:S]`` with our sinusoidal table as a non-persistent buffer."""

    def __init__(self, pe):
        super().__init__()
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        return x + self.pe[: x.shape[1]]


def _activation(act):
    name = type(act).__name__
    if name == "ReLU":
        return "relu"
    if name == "GELU":
        return "gelu" if act.approximate == "none" else nn.GELU(approximate="tanh")
    raise TypeError(f"unsupported activation {name}")


def torch_module_like(module, dtype=np.float64):
    """The ``torch.nn`` module equivalent to a ``numpy_transformer`` module, with its weights copied in.

    Supports Linear, Embedding, LayerNorm, MultiheadAttention, TransformerEncoderLayer, TransformerEncoder,
    TokenEmbedding and PositionalEncoding. The copy is in ``dtype``, in eval mode.
    """
    dt = _dt(dtype)
    name = type(module).__name__
    if name == "Linear":
        tm = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
    elif name == "Embedding":
        tm = nn.Embedding(module.num_embeddings, module.embedding_dim, padding_idx=module.padding_idx)
    elif name == "LayerNorm":
        tm = nn.LayerNorm(module.normalized_shape[0], eps=module.eps, elementwise_affine=module.elementwise_affine,
                          bias=module.bias is not None)
    elif name == "MultiheadAttention":
        tm = nn.MultiheadAttention(module.embed_dim, module.num_heads, dropout=module.dropout,
                                   bias=module.in_proj_bias is not None, kdim=module.kdim, vdim=module.vdim,
                                   batch_first=module.batch_first)
    elif name == "TransformerEncoderLayer":
        tm = _encoder_layer(module)
    elif name == "TransformerEncoder":
        first = module.layers[0]
        norm = None if module.norm is None else torch_module_like(module.norm, np.float64)
        tm = nn.TransformerEncoder(_encoder_layer(first), module.num_layers, norm=norm,
                                   enable_nested_tensor=False)
    elif name == "TokenEmbedding":
        tm = _TokenEmbedding(module.embedding.num_embeddings, module.d_model)
    elif name == "PositionalEncoding":
        tm = _PositionalEncoding(torch.from_numpy(np.asarray(module.pe, dtype=np.float64)))
    else:
        raise TypeError(f"no torch equivalent for {name}")
    tm = tm.to(dt)
    state = {k: torch.from_numpy(np.array(v, dtype=np.float64)).to(dt) for k, v in module.state_dict().items()}
    tm.load_state_dict(state, strict=True)
    return tm.eval()


def _encoder_layer(layer):
    return nn.TransformerEncoderLayer(
        layer.d_model, layer.self_attn.num_heads, dim_feedforward=layer.linear1.out_features,
        dropout=layer.dropout.p, activation=_activation(layer.activation), layer_norm_eps=layer.norm1.eps,
        batch_first=layer.batch_first, norm_first=layer.norm_first, bias=layer.linear1.bias is not None)


# the keyword holding each module's attention mask
_MASK_KWARG = {"MultiheadAttention": "attn_mask", "TransformerEncoderLayer": "src_mask", "TransformerEncoder": "mask"}


def module_grads(module, inputs, input_names, forward_kwargs, dout, dtype=np.float64):
    """Torch autograd's gradients of ``sum(dout * module(*inputs, **forward_kwargs))`` for the torch.nn
    equivalent of ``module`` (see :func:`torch_module_like`), in eval mode.

    Returns
    -------
    dict
        ``input name -> gradient`` for each float input, and ``parameter name -> gradient`` (torch's
        ``named_parameters`` names, the same as ``numpy_transformer``'s).
    """
    dt = _dt(dtype)
    tm = torch_module_like(module, dtype)
    t_inputs = [_tensor(a, dt, requires_grad=np.asarray(a).dtype.kind == "f") for a in inputs]
    kwargs = {k: (_tensor(v, dt) if isinstance(v, np.ndarray) else v) for k, v in (forward_kwargs or {}).items()}
    name = type(module).__name__
    mask_kw = _MASK_KWARG.get(name)
    if mask_kw and kwargs.get("is_causal") and kwargs.get(mask_kw) is None:
        # torch wants the causal mask itself (is_causal is only a hint there); ours builds it.
        batch_first = getattr(module, "batch_first", True)
        q = t_inputs[0]
        k = t_inputs[1] if name == "MultiheadAttention" else q
        seq = 1 if batch_first else 0
        kwargs[mask_kw] = _causal_bool(q.shape[seq], k.shape[seq])
    if name == "MultiheadAttention":
        kwargs.setdefault("need_weights", False)
    out = tm(*t_inputs, **kwargs)
    if isinstance(out, tuple):
        out = out[0]
    (out * _tensor(dout, dt)).sum().backward()
    grads = {n: _grad(t) for n, t in zip(input_names, t_inputs) if t.is_floating_point()}
    grads.update({n: _grad(p) for n, p in tm.named_parameters()})
    return grads
