"""The trace's gradients from the inside: the attention backward's own intermediates (dP, dA, dq, dk,
dv) with their per-head norms, and the by-layer health check (vanishing or exploding gradients), for
:mod:`numpy_transformer.study.trace`.

Layers are found by name: a stack's ``layers.i`` (``encoder.layers.3``, ``transformer.decoder.layers.0``)
or GPT's ``h.i``. A layer's input gradient is the residual stream entering it; the check compares each
with the top layer's (the one nearest the loss) of its stack.
"""

from __future__ import annotations

import math
import re

import numpy as np

VANISHING_RATIO = 1e-3        # a layer's input gradient below this x the top layer's: vanishing
EXPLODING_RATIO = 1e3         # ... above this x the top layer's: exploding

LAYER = re.compile(r"^(.*\.)?(?:layers|h)\.(\d+)$")        # a stack's layer: encoder.layers.3, GPT's h.0
IN_LAYER = re.compile(r"^((?:.*\.)?(?:layers|h)\.\d+)\.")    # a name inside one

BACKWARD_NAMES = {           # the attention backward's intermediates: record name suffix, note
    "d probs": (".softmax", "dP = dL/d probs (the softmax output's gradient)"),
    "d scores": (".scores (q k^T / sqrt(Dh))", "dA = dL/d scores (the softmax input's gradient)"),
    "dq": (".q (heads)", "dq"),
    "dk": (".k (heads)", "dk"),
    "dv": (".v (heads)", "dv"),
}


def layer_key(name):
    """``"encoder.layers.3"`` -> ``("encoder.", 3)``: the stack, then the depth."""
    m = LAYER.match(name)
    return (m.group(1) or "", int(m.group(2)))


def layer_grad_norms(records):
    """``{layer name: norm}`` of each layer's first backward record (its input gradient), by depth."""
    found = {}
    for r in records:
        if r.phase == "backward" and LAYER.match(r.name) and r.name not in found:
            found[r.name] = r.norm
    return dict(sorted(found.items(), key=lambda kv: layer_key(kv[0])))


def layer_param_grad_norms(records):
    """``{layer name: norm}`` of all of each layer's parameter gradients together, by depth."""
    sums = {}
    for r in records:
        m = IN_LAYER.match(r.name) if r.phase == "parameter" else None
        if m:
            sums[m.group(1)] = sums.get(m.group(1), 0.0) + r.norm ** 2
    return {name: math.sqrt(v) for name, v in sorted(sums.items(), key=lambda kv: layer_key(kv[0]))}


def attention_recorder(trace, name):
    """``record(what, g)`` for the attention backward of the module called ``name``: adds ``g`` to
    ``trace`` (phase "backward") under the forward record's name, with every head's norm in its note
    (dk, dv: per key/value head) and a flag when some heads' gradients are exactly zero while others'
    are not (a head cut off from the loss)."""
    def record(what, g):
        suffix, note = BACKWARD_NAMES[what]
        axes = tuple(i for i in range(g.ndim) if i != g.ndim - 3)                 # all but the heads
        heads = np.sqrt(np.sum(np.square(g, dtype=np.float64), axis=axes))        # (heads,)
        shown = " ".join(f"{v:.3g}" for v in heads[:8]) + (" ..." if heads.size > 8 else "")
        zero = np.flatnonzero(heads == 0)
        flag = ""
        if 0 < zero.size < heads.size:
            flag = f"gradient exactly zero in head(s) {', '.join(map(str, zero[:8]))} (the others' are not)"
        trace.add(name + suffix, g, "backward", note=f"{note}; per-head |g|: {shown}", flag=flag)
    return record


def flag_layers(trace):
    """Flag each layer whose input-gradient norm is below ``VANISHING_RATIO`` x (or above
    ``EXPLODING_RATIO`` x) the top layer's of its stack."""
    stacks = {}
    for name, norm in trace.layer_grad_norms().items():
        stacks.setdefault(layer_key(name)[0], []).append((name, norm))
    for layers in stacks.values():
        top_name, top = layers[-1]
        if len(layers) < 2 or not top > 0 or not math.isfinite(top):
            continue
        for name, norm in layers[:-1]:
            ratio = norm / top
            if ratio < VANISHING_RATIO:
                kind = "vanishing"
            elif ratio > EXPLODING_RATIO:
                kind = "exploding"
            else:
                continue
            r = trace.get(name, "backward")
            why = f"{kind} gradient: |g| = {norm:.3g}, {ratio:.3g} x the top layer's ({top_name}: {top:.3g})"
            r.flag = f"{r.flag}; {why}" if r.flag else why
