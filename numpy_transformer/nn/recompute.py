"""Activation checkpointing ("recompute"), the spirit of ``torch.utils.checkpoint``: a layer run with
:func:`run_layer` keeps only its inputs, and :func:`backward_layer` redoes its forward inside the
backward before running the layer's own backward.

The stacks and models take it as an option (``checkpoint=True``: ``nt.TransformerEncoder``,
``nt.TransformerDecoder``, ``nt.TransformerModel``, ``nt.Seq2SeqModel``, ``nt.GPT``). Memory: a plain
forward of L layers keeps L layers' caches (every activation each backward needs, the (B, H, S, S)
attention probabilities among them); a checkpointed one keeps L layer inputs (B, S, D) and, while the
backward runs, one layer's caches at a time. The price is one more forward of each layer.

Why the gradients are the same, bit for bit (docs/derivations.md, "Recomputation"): the backward of a
layer is a function of its cache, and the cache is a function of the layer's input, its parameters
and the random draws of its dropouts. The recomputation runs the same NumPy operations on the same
input with the same parameters (a backward changes only ``.grad``) and replays the same draws: every
generator of the layer is set back to its state before the first forward, then, after the
recomputation, to where it was (so the generators end as without checkpointing: the backward draws
nothing). The attributes a forward leaves for inspection (``last_mask``, ``masks``) are kept as the
first forward left them.

The cache machinery (nn/module.py): the first forward runs inside the caller's pass as usual and its
caches are then dropped (those it appended, nothing else). The recomputation runs while the
caller's backward consumes its pass, and is tagged with that pass
(:func:`~numpy_transformer.nn.module.replaying_backward_pass`), so the layer's backward, nested
in it, takes exactly the recomputed caches. ``nt.trace`` records the first forward only. That
bookkeeping is the calling thread's own: a layer recomputed in one thread changes nothing in another.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .module import replaying_backward_pass

__all__ = ["run_layer", "backward_layer", "Saved"]

_KEPT = ("last_mask", "masks", "_masks_pass")     # what a forward leaves on a module for inspection


class Saved(NamedTuple):
    """What a checkpointed layer keeps: its call's arguments and its generators' states before it."""
    args: tuple
    kwargs: dict
    states: list               # [(numpy.random.Generator, its bit_generator.state)]


def _modules(layer):
    """The layer's modules, each once (a module shared inside the layer appears once)."""
    return list({id(m): m for m in layer.modules()}.values())


def _generators(layer):
    gens = {}
    for m in layer.modules():
        g = m.__dict__.get("rng")
        if isinstance(g, np.random.Generator):
            gens[id(g)] = g
    return list(gens.values())


def _drop_new_caches(counts):
    for m, n in counts:
        del m._caches[n:]


def run_layer(layer, checkpoint, *args, **kwargs):
    """``layer(*args, **kwargs)`` -> ``(out, saved)``.

    ``checkpoint=False``: ``saved`` is None and the layer keeps its caches as usual.
    ``checkpoint=True``: the caches this call left in the layer's modules are dropped and ``saved``
    (a :class:`Saved`) holds what :func:`backward_layer` needs to recompute them.
    """
    if not checkpoint:
        return layer(*args, **kwargs), None
    states = [(g, g.bit_generator.state) for g in _generators(layer)]
    counts = [(m, len(m._caches)) for m in _modules(layer)]
    out = layer(*args, **kwargs)
    _drop_new_caches(counts)
    return out, Saved(args, kwargs, states)


def backward_layer(layer, saved, dout):
    """The layer's backward for ``dout``; with ``saved`` (from :func:`run_layer`) its forward is run
    again first, with the same inputs and the same random draws, so the result is the plain path's."""
    if saved is None:
        return layer.backward(dout)
    modules = _modules(layer)
    kept = [(m, {k: (list(m.__dict__[k]) if k == "masks" else m.__dict__[k]) for k in _KEPT if k in m.__dict__})
            for m in modules]
    now = [(g, g.bit_generator.state) for g, _ in saved.states]
    counts = [(m, len(m._caches)) for m in modules]
    try:
        # the recomputed caches belong to the pass being consumed; the trace saw this forward already
        with replaying_backward_pass():
            for g, state in saved.states:
                g.bit_generator.state = state       # replay the first forward's draws
            layer(*saved.args, **saved.kwargs)
    except BaseException:
        _drop_new_caches(counts)
        raise
    finally:
        for g, state in now:
            g.bit_generator.state = state           # the backward draws nothing
        for m, attrs in kept:
            for k, v in attrs.items():
                object.__setattr__(m, k, v)
    try:
        return layer.backward(dout)
    except BaseException:
        _drop_new_caches(counts)                    # a refused gradient leaves no recomputed cache behind
        raise
