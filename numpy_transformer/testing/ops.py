"""The functional ops' cases: how to call each forward/backward pair, how to draw its inputs, and
which function of torch's it must equal.

Each :class:`OpCase` names its pair (resolved in :mod:`numpy_transformer.functional` at call time,
so a test that patches ``F.softmax_backward`` is seen), draws inputs over random shapes and options
(``draw(c, dtype, **options)`` with a :mod:`chooser <.choosers>`; the draws are in :mod:`.op_draws`),
and lists the rows of the ``gradcheck`` report as ``(label, options)``.

Its torch side is named by the case itself: a regular op gives torch's function as a dotted string,
``torch="torch.nn.functional.layer_norm"``, and ``torch_args`` says how its arguments map (a dict of
renames, ``{"x": "input"}``, or a function of our keyword arguments returning torch's); the string is
resolved on the torch side (``reference_torch.table.torch_op``, with importlib: this package never
imports torch). A gated feed-forward (``gated=True``: ``down(act(gate(x)) * up(x))``) names the gate's
activation, ``torch="torch.nn.functional.silu"``; the torch side composes it with torch's ``linear``,
and the op's static options (GELU's ``approximate``) go to the activation. An irregular op
(``torch=None``: torch has no such function, or it needs more than a mapping of its arguments) has an
adapter of the same name in ``reference_torch.table.ADAPTERS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Union

import numpy as np

from .. import functional as F
from . import op_draws as draws
from .op_draws import Draw

__all__ = ["Draw", "OpCase", "OPS", "TOL"]

# Normwise relative error allowed against torch: max|ours - torch| / max|torch|.
TOL = {"float64": 1e-10, "float32": 1e-4}


@dataclass(frozen=True)
class OpCase:
    """A functional op: ``forward(**inputs, **static) -> ({"out": ..., extras}, cache)`` and
    ``backward(dout, cache) -> {input name: gradient}``."""
    name: str                                    # also its key in reference_torch.table.OPS
    forward: Callable
    backward: Callable
    draw: Callable                               # (chooser, dtype, **options) -> Draw
    examples: tuple = (("", {}),)                # gradcheck report rows: (label suffix, options)
    nondiff: tuple = ()                          # inputs that are not differentiable (ids)
    tol: dict = None                             # per dtype; default TOL
    short: str = None                            # the report's name for it, when shorter than ``name``
    torch: Optional[str] = None                  # torch's function, dotted; None: an adapter in the torch table
    torch_args: Union[Mapping[str, str], Callable, None] = None   # our arguments -> torch's (see torch_kwargs)
    gated: bool = False                          # a gated feed-forward: ``torch`` names the gate's activation

    def torch_kwargs(self, kwargs):
        """Our keyword arguments (inputs and static options, as tensors) as those of torch's function
        :attr:`torch`: renamed by a ``torch_args`` dict (names it does not list pass unchanged), or
        computed by a ``torch_args`` function (``torch_args(**kwargs) -> dict``)."""
        if self.torch_args is None:
            return dict(kwargs)
        if callable(self.torch_args):
            return self.torch_args(**kwargs)
        return {self.torch_args.get(k, k): v for k, v in kwargs.items()}

    def label(self, suffix):
        name = self.short or self.name
        return f"{name} ({suffix})" if suffix else name

    def tolerance(self, dtype):
        return (self.tol or TOL)[np.dtype(dtype).name]


def _layer_norm_args(x, weight=None, bias=None, eps=1e-5, normalized_shape=None):
    """torch's ``layer_norm`` wants ``normalized_shape``; ours infers it from weight, bias or the last axis."""
    if normalized_shape is None:
        normalized_shape = next((p.shape for p in (weight, bias) if p is not None), x.shape[-1:])
    return {"input": x, "normalized_shape": tuple(normalized_shape), "weight": weight, "bias": bias, "eps": eps}


def _rms_norm_args(x, weight=None, eps=None, normalized_shape=None):
    """torch's ``rms_norm`` wants ``normalized_shape``; with a weight, ours takes it from the weight."""
    shape = tuple(normalized_shape) if weight is None else tuple(weight.shape)
    return {"input": x, "normalized_shape": shape, "weight": weight, "eps": eps}


_X = {"x": "input"}                              # torch calls the input ``input``
_TF = "torch.nn.functional."


def _pair(fwd, bwd, names, extras=None):
    """Adapters for a pair ``F.<fwd>(**inputs, **static) -> (out, cache)`` whose backward returns the
    gradients of ``names`` in order (a lone array for one name)."""
    def forward(**kw):
        out, cache = getattr(F, fwd)(**kw)
        return {"out": out}, cache

    def backward(dout, cache):
        g = getattr(F, bwd)(dout, cache)
        g = g if isinstance(g, tuple) else (g,)
        return {n: v for n, v in zip(names, g) if v is not None}
    return forward, backward


# --------------------------------------------------------------------------------------------------
# adapters for the pairs whose signature is not (x, ...) -> (out, cache)
# --------------------------------------------------------------------------------------------------

def _embedding_forward(ids, weight, **options):
    """With ``max_norm`` the forward renormalises rows of ``weight`` in place: it gets a copy (the drawn
    table stays as drawn for the torch side) and the renormed table is an output, ``weight_after``."""
    weight = np.array(weight, copy=True)
    out, cache = F.embedding_forward(ids, weight, **options)
    return ({"out": out} if options.get("max_norm") is None else {"out": out, "weight_after": weight}), cache


def _dropout_forward(**kw):
    out, cache = F.dropout_forward(**kw)
    return {"out": out}, cache


def _mha_forward(x=None, query=None, key=None, value=None, need_weights=False, average_attn_weights=True,
                 **kw):
    if x is not None:
        query = key = value = x                    # self-attention: one input used three times
    out, probs, cache = F.multi_head_attention_forward(query, key, value, **kw)
    res = {"out": out}
    if need_weights:
        res["weights"] = probs.mean(axis=1) if average_attn_weights else probs
    return res, (cache, x is not None)


def _mha_backward(dout, cache):
    cache, self_attention = cache
    dq, dk, dv, grads = F.multi_head_attention_backward(dout, cache)
    g = {"x": dq + dk + dv} if self_attention else {"query": dq, "key": dk, "value": dv}
    g.update({k.replace(".", "_"): v for k, v in grads.items()})       # out_proj.weight -> out_proj_weight
    return g


# --------------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------------

_SDPA = ("query", "key", "value")

OPS = {case.name: case for case in [
    OpCase("linear", *_pair("linear_forward", "linear_backward", ("x", "weight", "bias")), draws.linear,
           examples=(("", {"bias": True}), ("no bias", {"bias": False})),
           torch=_TF + "linear", torch_args=_X),
    OpCase("embedding", _embedding_forward, _pair("embedding_forward", "embedding_backward", ("weight",))[1],
           draws.embedding, nondiff=("ids",),
           # finite differences differentiate W -> renorm(W)[ids]: the report's rows leave max_norm and
           # scale_grad_by_freq off (by design their gradients are not that derivative; torch compares them)
           examples=(("", {"padding_idx": None, "max_norm": None, "scale_grad_by_freq": False}),
                     ("padding_idx=0, FD skips the frozen row",
                      {"padding_idx": 0, "max_norm": None, "scale_grad_by_freq": False}))),
    OpCase("layer_norm", *_pair("layer_norm_forward", "layer_norm_backward", ("x", "weight", "bias")),
           draws.layer_norm, examples=(("", {"affine": "both", "dims": 1}),
                                       ("no affine", {"affine": "none", "dims": 1}),
                                       ("2 dims", {"affine": "both", "dims": 2})),
           torch=_TF + "layer_norm", torch_args=_layer_norm_args),
    OpCase("rms_norm", *_pair("rms_norm_forward", "rms_norm_backward", ("x", "weight")), draws.rms_norm,
           examples=(("", {"weight": True, "dims": 1}), ("2 dims, no weight", {"weight": False, "dims": 2})),
           torch=_TF + "rms_norm", torch_args=_rms_norm_args),
    OpCase("softmax", *_pair("softmax_forward", "softmax_backward", ("x",)), draws.softmax,
           examples=(("axis=-1", {"axis": -1, "with_neginf": False}), ("axis=1", {"axis": 1, "with_neginf": True,
                                                                                       "axis_len": 3})),
           torch=_TF + "softmax", torch_args={"x": "input", "axis": "dim"}),
    OpCase("cross_entropy", *_pair("cross_entropy_forward", "cross_entropy_backward", ("input",)),
           draws.cross_entropy, nondiff=("target",),
           examples=(("(N, C), index targets", {"layout": "NC", "target": "index", "weight": False,
                                                "ignore": "default", "smoothing": 0.0, "reduction": "mean",
                                                "classes": 4}),
                     ("(N, C, d1, d2), weight, ignore_index a class, smoothing", {
                         "layout": "NCdd", "target": "index", "weight": True, "ignore": "class", "smoothing": 0.1,
                         "reduction": "mean", "classes": 3}),
                     ("(C,), probability targets, weight, sum", {"layout": "C", "target": "prob", "weight": True,
                                                                 "smoothing": 0.1, "reduction": "sum", "classes": 5}),
                     ("(N, C, d1), probability targets, none", {"layout": "NCd", "target": "prob", "weight": False,
                                                                "smoothing": 0.0, "reduction": "none", "classes": 3})),
           torch=_TF + "cross_entropy"),
    OpCase("relu", *_pair("relu_forward", "relu_backward", ("x",)), draws.relu, examples=(("", {"zeros": False}),),
           torch=_TF + "relu", torch_args=_X),
    OpCase("gelu", *_pair("gelu_forward", "gelu_backward", ("x",)), draws.gelu,
           examples=(("approximate=none", {"approximate": "none"}), ("approximate=tanh", {"approximate": "tanh"})),
           torch=_TF + "gelu", torch_args=_X),
    OpCase("silu", *_pair("silu_forward", "silu_backward", ("x",)), draws.silu,
           examples=(("", {"extreme": False}),),
           torch=_TF + "silu", torch_args=_X),
    OpCase("swiglu", *_pair("swiglu_forward", "swiglu_backward",
                            ("x", "w_gate", "w_up", "w_down", "b_gate", "b_up", "b_down")), draws.gated,
           examples=(("no bias", {"bias": False}), ("bias", {"bias": True})), torch=_TF + "silu", gated=True),
    OpCase("geglu", *_pair("geglu_forward", "geglu_backward",
                           ("x", "w_gate", "w_up", "w_down", "b_gate", "b_up", "b_down")), draws.gated,
           examples=(("exact, no bias", {"bias": False}), ("tanh, bias", {"bias": True, "approximate": "tanh"})),
           torch=_TF + "gelu", gated=True),
    OpCase("dropout", _dropout_forward, _pair("dropout_forward", "dropout_backward", ("x",))[1], draws.dropout,
           examples=(("fixed mask, p=0.3", {"p": 0.3}),)),
    OpCase("scaled_dot_product_attention",
           *_pair("scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward", _SDPA),
           draws.sdpa, examples=(("no mask", {"mask": "none"}), ("bool mask, a fully masked row",
                                                                 {"mask": "fully_masked_rows"}),
                                 ("bool mask", {"mask": "bool"}), ("float mask", {"mask": "float"}),
                                 ("causal", {"mask": "is_causal"})),
           short="sdpa", torch=_TF + "scaled_dot_product_attention"),
    OpCase("scaled_dot_product_attention_gqa",
           *_pair("scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward", _SDPA),
           draws.sdpa_gqa, examples=(("Hq=4, Hkv=2, bool mask", {"mask": "bool_full", "kv_heads": 2, "groups": 2,
                                                              "seq": (3, 4)}),
                                     ("multi-query Hkv=1, causal", {"mask": "is_causal", "kv_heads": 1, "groups": 3,
                                                                    "seq": (3, 3)})),
           short="sdpa gqa", torch=_TF + "scaled_dot_product_attention"),
    OpCase("flash_attention", *_pair("flash_attention_forward", "flash_attention_backward", _SDPA), draws.flash,
           examples=(("tiles 2x3, causal + bool mask", {"mask": "causal+bool", "blocks": (2, 3)}),
                     ("tiles 2x2, float mask", {"mask": "float", "blocks": (2, 2), "seq": (3, 4)}))),
    OpCase("relative_position_bias", *_pair("relative_position_bias_forward", "relative_position_bias_backward",
                                            ("weight",)), draws.relative_position_bias, nondiff=("buckets",),
           examples=(("bidirectional, S=3, T=5", {"bidirectional": True, "s": 3, "t": 5}),
                     ("causal, S=T=4", {"bidirectional": False, "s": 4, "t": 4})), short="rel_pos_bias"),
    OpCase("flash_attention_gqa", *_pair("flash_attention_forward", "flash_attention_backward", _SDPA),
           draws.flash_gqa, examples=(("Hq=4, Hkv=2, tiles 2x3, causal + float mask",
                                       {"mask": "causal+float", "blocks": (2, 3), "kv_heads": 2, "groups": 2,
                                        "seq": (3, 5)}),),
           short="flash gqa"),
    OpCase("multi_head_attention", _mha_forward, _mha_backward, draws.mha,
           examples=(("self-attention, bool masks", {"mode": "self", "mask": "causal_bool+padding", "bias": True,
                                                     "bias_kv": False, "zero_attn": False}),
                     ("cross, bool masks", {"mode": "cross", "mask": "per_head+padding", "packed": True,
                                            "bias_kv": False, "zero_attn": False, "t": 3}),
                     ("kdim, vdim, float mask", {"mode": "cross", "mask": "float", "packed": False,
                                                 "bias_kv": False, "zero_attn": False}),
                     ("causal, no bias", {"mode": "self", "mask": "is_causal", "bias": False, "bias_kv": False,
                                          "zero_attn": False}),
                     ("add_bias_kv, add_zero_attn, padding", {"mode": "self", "mask": "causal_bool+padding",
                                                              "bias_kv": True, "zero_attn": True}))),
    OpCase("rope", *_pair("rope_forward", "rope_backward", ("x",)), draws.rope,
           examples=(("rotate half", {"positions": "default", "interleaved": False, "s": 4}),
                     ("interleaved, offset positions", {"positions": "offset", "interleaved": True, "s": 3}),
                     ("per-sequence positions", {"positions": "batch", "interleaved": False, "s": 3}))),
]}
