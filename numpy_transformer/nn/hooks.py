"""Hooks: how the modules tell whoever listens what they compute, without knowing who listens.

The core calls these functions where a study tool may want to look: every module's output
(``Module.__call__``) and the gradient every backward returns (:func:`forward`, :func:`backward`),
inside attention the head split, the scores and the softmax (:func:`attention`) and the backward's
own intermediates (:func:`attention_recorder`), a layer's residual stream between its sub-layers
(:func:`residual`), a scaled embedding computed outside a ``TokenEmbedding`` (:func:`embedding`).
``nt.trace`` (:mod:`numpy_transformer.study.trace`) is such a listener: a :class:`Subscriber`.

Per thread: the subscribers are the calling thread's (``threading.local``), so a trace opened in one
thread records that thread's forwards and backwards only, never another thread's, even of the same
modules. :func:`subscribed` adds one for a block (nested blocks each receive everything their block
runs); :func:`suspended` silences the thread's for a block (activation checkpointing's recomputed
forward, which the subscribers saw already, see ``nn.module.replaying_backward_pass``). A forked child
keeps the forking thread's subscribers.

Kept off the hot path: every call site asks :func:`active` first (one thread-local lookup) and builds
nothing when no one listens.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["Subscriber", "active", "subscribers", "subscribed", "suspended", "forward", "backward",
           "attention", "attention_recorder", "residual", "embedding"]


class Subscriber:
    """What a listener implements (each method does nothing here: override the ones you need).

    ``module`` is always the module that computed the value; the arrays are the module's own (copy
    what you keep)."""

    def on_forward(self, module, out, args):
        """A module's ``forward`` returned ``out`` (called by ``__call__``); ``args``: its positional
        arguments."""

    def on_backward(self, module, grad):
        """A module's ``backward`` returned ``grad`` (an array, a tuple of them, or None)."""

    def on_attention(self, module, cache):
        """Inside an attention forward on the standard path: its cache (``cache.attn``: the per-head
        ``q``, ``k``, ``v``, ``probs`` and ``scale`` of scaled dot-product attention)."""

    def attention_recorder(self, module):
        """A ``record(name, array)`` callable for the attention backward's intermediates (dP, dA, dq,
        dk, dv), or None to see none of them."""
        return None

    def on_residual(self, module, grad, where):
        """A layer's backward: the residual stream's gradient ``grad`` between two sub-layers."""

    def on_embedding(self, module, out, name=None):
        """A scaled token embedding ``out`` computed outside a ``TokenEmbedding`` (the encoder model
        scales its ``embed`` lookup itself); ``name``, when given, the record's name."""


class _Local(threading.local):
    """The calling thread's subscribers (a tuple: replaced, never mutated, so a call site iterates a
    snapshot)."""

    def __init__(self):
        self.subscribers = ()


_LOCAL = _Local()


def active():
    """Whether anyone listens in the calling thread."""
    return bool(_LOCAL.subscribers)


def subscribers():
    """The calling thread's subscribers, outermost first."""
    return _LOCAL.subscribers


@contextlib.contextmanager
def subscribed(subscriber):
    """``subscriber`` receives the calling thread's events while the block runs (other threads' never).

    Yields
    ------
    Subscriber
        ``subscriber`` itself.
    """
    local = _LOCAL
    previous = local.subscribers
    local.subscribers = previous + (subscriber,)
    try:
        yield subscriber
    finally:
        local.subscribers = previous


@contextlib.contextmanager
def suspended():
    """No subscriber of the calling thread receives anything while the block runs (they all resume
    after it): a recomputed forward (activation checkpointing) is one they saw already."""
    local = _LOCAL
    previous, local.subscribers = local.subscribers, ()
    try:
        yield
    finally:
        local.subscribers = previous


def forward(module, out, args=()):
    for s in _LOCAL.subscribers:
        s.on_forward(module, out, args)


def backward(module, grad):
    for s in _LOCAL.subscribers:
        s.on_backward(module, grad)


def attention(module, cache):
    for s in _LOCAL.subscribers:
        s.on_attention(module, cache)


def attention_recorder(module):
    """The ``record(name, array)`` callable an attention backward is handed (every subscriber's
    recorder in one), or None when no subscriber wants the intermediates."""
    recorders = [r for r in (s.attention_recorder(module) for s in _LOCAL.subscribers) if r is not None]
    if not recorders:
        return None
    if len(recorders) == 1:
        return recorders[0]

    def record(name, array):
        for r in recorders:
            r(name, array)
    return record


def residual(module, grad, where):
    for s in _LOCAL.subscribers:
        s.on_residual(module, grad, where)


def embedding(module, out, name=None):
    for s in _LOCAL.subscribers:
        s.on_embedding(module, out, name)
