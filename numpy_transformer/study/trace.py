"""Trace mode: record every sub-layer's output on the forward and its input gradient on the backward,
with the seed design's health checks (its "dimension tracking" table).

Usage::

    with nt.trace(model) as t:
        y = model(x)
        model.backward(dy)
    print(t.table())          # one row per sub-layer and direction, abnormal values flagged
    t.problems()              # just the flagged rows
    t.first_nonfinite()       # the sub-layer where NaN/inf first appeared, or None
    print(t.report())         # a summary line and the flagged rows (what ``train --trace-every`` prints)

Three phases are recorded: ``forward`` (each sub-layer's output, and inside attention the head split,
the scores and the softmax), ``backward`` (the gradient each sub-layer returns for its input; inside
attention the backward's own dP, dA, dq, dk, dv per head, handed over by the attention backward, see
:func:`attention_recorder`; inside each layer the residual stream's gradient between its sub-layers)
and ``parameter`` (each parameter's accumulated gradient, recorded when the block ends if a backward
ran in it).

Health checks (a record's ``flag``): embedding std far from 1 (the ``sqrt(d_model)`` scale missing),
positional encoding whose position 0 is not ``sin(0)=0, cos(0)=1``, a softmax whose input was not
``q k^T / sqrt(Dh)`` (read off its output: the ``1/sqrt(Dh)`` scale missing, at any step, while a
trained head's large but rightly scaled scores pass), softmax rows not summing to 1, NaN or inf (the
first record holding one says so), a gradient exactly zero (or exactly zero in some heads only), a
gradient entry above ``EXPLODING_GRAD``, and by layer a gradient vanishing or exploding relative to the
top layer's (``VANISHING_RATIO``, ``EXPLODING_RATIO``; ``Trace.layer_grad_norms``).

How it records: the modules call the hooks of :mod:`numpy_transformer.nn.hooks` (each checks
``hooks.active()`` first, one thread-local lookup, so nothing is built when no one listens) and a
``with nt.trace(...)`` block subscribes a recorder (:class:`_Recorder`) to them for its duration. The
core imports nothing of this module.

Threads: the hooks' subscribers are the calling thread's (``threading.local``). A ``with nt.trace(...)``
block records the forwards and backwards its own thread runs, never another thread's, even of the same
modules; a model run in a worker thread is traced by a block opened in that thread. Nested blocks each
record everything their own block runs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from ..nn import hooks
from ..utils.text import WIDTH, fit
from . import trace_grads as _trace_grads

__all__ = ["trace", "Trace", "Record"]

# Thresholds of the health checks (the seed design's "normal range" column).
SCALE_TOLERANCE = 1.5        # the softmax saw scores outside [1/1.5, 1.5] x q k^T / sqrt(Dh): a wrong scale
EMBEDDING_STD_RANGE = (0.5, 2.0)   # scaled token embedding std; ~1 expected, ~1/sqrt(D) if sqrt(D) is missing
EXPLODING_GRAD = 1e4          # a gradient entry larger than this is flagged as exploding
VANISHING_RATIO = _trace_grads.VANISHING_RATIO   # by layer: input gradient below 1e-3 x the top layer's
EXPLODING_RATIO = _trace_grads.EXPLODING_RATIO   # ... above 1e3 x the top layer's


@dataclass
class Record:
    """Statistics of one traced array. ``phase`` is "forward", "backward" or "parameter"; ``flag`` names
    a problem (empty when the values look healthy)."""
    name: str
    phase: str
    shape: tuple
    dtype: str
    mean: float
    std: float
    min: float
    max: float
    note: str = ""
    flag: str = ""
    norm: float = float("nan")    # the L2 norm of the finite entries (a gradient's size, by layer)
    array: Optional[np.ndarray] = field(default=None, repr=False)   # a copy, with keep_arrays=True


@dataclass
class Trace:
    """The records of one ``with nt.trace(...)`` block, in execution order."""
    records: List[Record] = field(default_factory=list)
    backward_modules: list = field(default_factory=list, repr=False)   # whose backward ran, in order
    keep_arrays: bool = False

    def get(self, name, phase="forward", note=None):
        """The last record called ``name`` in ``phase`` (and with ``note``, when given); KeyError if none."""
        for r in reversed(self.records):
            if r.name == name and r.phase == phase and (note is None or r.note == note):
                return r
        raise KeyError(f"no {phase} record named {name!r}" + ("" if note is None else f" with note {note!r}"))

    def layer_grad_norms(self):
        """``{layer name: norm}`` of each layer's input gradient (the residual stream entering it), from
        the input side up: the numbers ``plot gradients`` draws (``encoder.layers.0`` ...)."""
        return _trace_grads.layer_grad_norms(self.records)

    def layer_param_grad_norms(self):
        """``{layer name: norm}`` of all of each layer's parameter gradients together (one vector), from
        the input side up: the by-layer gradient norm of the pre-LN vs post-LN comparison."""
        return _trace_grads.layer_param_grad_norms(self.records)

    def add(self, name, array, phase="forward", note="", flag=""):
        a = np.asarray(array)
        finite_mask = np.isfinite(a)
        n_bad = int(a.size - np.count_nonzero(finite_mask))
        finite = a[finite_mask] if n_bad else a
        if finite.size:
            stats = (float(finite.mean()), float(finite.std()), float(finite.min()), float(finite.max()))
        else:
            stats = (float("nan"),) * 4
        if n_bad:
            first = self.first_nonfinite() is None
            flag = _join(flag, f"{n_bad} NaN/inf values" + (" (first NaN/inf of this trace)" if first else ""))
        norm = float(np.sqrt(np.sum(np.square(finite, dtype=np.float64)))) if finite.size else float("nan")
        record = Record(name, phase, tuple(a.shape), str(a.dtype), *stats, note, flag, norm,
                        a.copy() if self.keep_arrays else None)
        if phase in ("backward", "parameter") and a.size and not n_bad:
            if stats[2] == 0.0 and stats[3] == 0.0:
                record.flag = _join(record.flag, "gradient exactly zero")
            elif max(abs(stats[2]), abs(stats[3])) > EXPLODING_GRAD:
                record.flag = _join(record.flag, f"exploding gradient (|g| > {EXPLODING_GRAD:g})")
        self.records.append(record)
        return record

    def problems(self):
        """The flagged records; the first NaN/inf one names the layer where it appears first."""
        return [r for r in self.records if r.flag]

    def first_nonfinite(self):
        """Name of the first sub-layer (in execution order) whose output holds NaN or inf, or None."""
        for r in self.records:
            if "NaN/inf" in r.flag:
                return f"{r.name} ({r.phase})"
        return None

    def summary(self):
        """One line: how many records per phase, how many flagged, where NaN/inf first appeared."""
        counts = {}
        for r in self.records:
            counts[r.phase] = counts.get(r.phase, 0) + 1
        parts = ", ".join(f"{n} {phase}" for phase, n in counts.items()) or "nothing recorded"
        bad = self.problems()
        line = f"{len(self.records)} records ({parts}); "
        line += f"{len(bad)} flagged" if bad else "no problems"
        first = self.first_nonfinite()
        if first:
            line += f"; NaN/inf first appears at {first}"
        return line

    def report(self, max_problems=20):
        """The summary line, then one line per flagged record (at most ``max_problems``)."""
        bad = self.problems()
        lines = [self.summary()]
        for r in bad[:max_problems]:
            lines.append(f"  !! {r.name} ({r.phase}) {r.shape}: {r.flag}")
        if len(bad) > max_problems:
            lines.append(f"  ... and {len(bad) - max_problems} more flagged records")
        return "\n".join(lines)

    def to_dicts(self):
        """The records as plain dicts (JSON-serialisable; NaN statistics become None)."""
        def num(x):
            return x if np.isfinite(x) else None
        return [dict(name=r.name, phase=r.phase, shape=list(r.shape), dtype=r.dtype, mean=num(r.mean),
                     std=num(r.std), min=num(r.min), max=num(r.max), norm=num(r.norm), note=r.note,
                     flag=r.flag)
                for r in self.records]

    def table(self, phase=None, width=WIDTH):
        """The records (optionally one phase only) as an aligned text table, ``width`` columns wide.

        A name too long for its column gets a line of its own, the numbers go on the next; a note (and
        a flag, ``!! ...``) follows the numbers, or goes below them, indented, when it does not fit."""
        records = [r for r in self.records if phase is None or r.phase == phase]
        dtypes = sorted({r.dtype for r in records})
        common = dtypes[0] if len(dtypes) == 1 else None
        stats_w = 1 + 4 + 1 + 16 + 4 * 10                     # dir, shape, mean/std/min/max
        room = max(12, width - stats_w)                        # longer names get a line of their own
        name_w = max([4] + [len(r.name) for r in records if len(r.name) <= room])
        head = f"{'name':<{name_w}} {'dir':<4} {'shape':<16}{'mean':>10}{'std':>10}{'min':>10}{'max':>10}"
        rows = [] if common is None or len(head) + 15 <= width else [f"(every array {common})"]
        rows += [head + (f"  (all {common})" if common and not rows else ""), "-" * len(head)]
        for r in records:
            note = _join(r.note, f"!! {r.flag}" if r.flag else "")
            if common is None:
                note = _join(r.dtype, note)
            stats = (f" {_DIR.get(r.phase, r.phase[:4]):<4} {str(r.shape):<16}"
                     + "".join(f" {_num(v):>9}" for v in (r.mean, r.std, r.min, r.max)))
            if len(r.name) > name_w:
                rows.append(r.name)
                line = " " * name_w + stats
            else:
                line = f"{r.name:<{name_w}}" + stats
            if note and len(line) + 2 + len(note) <= width:
                rows.append(f"{line}  {note}")
            else:
                rows.append(line)
                if note:
                    rows.append(fit("    " + note, width))
        return "\n".join(rows)


def _num(v):
    """At most 9 characters: 4 significant digits, 3 when the exponent needs the room."""
    text = f"{v:.4g}"
    return text if len(text) <= 9 else f"{v:.3g}"


_DIR = {"forward": "fwd", "backward": "bwd", "parameter": "grad"}


def _join(a, b):
    return f"{a}; {b}" if a and b else (a or b)


def active():
    """Whether a trace is recording in the calling thread."""
    return any(isinstance(s, _Recorder) for s in hooks.subscribers())


#: nothing is recorded in the calling thread while the block runs (the hooks' own: a recomputed forward)
suspended = hooks.suspended


def _name(module):
    return getattr(module, "_trace_name", None) or type(module).__name__


def _embedding_flag(out):
    lo, hi = EMBEDDING_STD_RANGE
    std = float(np.std(out)) if out.size else 1.0
    if not lo <= std <= hi:
        return f"embedding std {std:.3g} far from 1 (missing the sqrt(d_model) scale?)"
    return ""


def _position_flag(module, out, args):
    """Position 0 must add sin(0)=0 to even and cos(0)=1 to odd features: checked on the table and on
    what the forward actually added (``out - x`` at position 0), so an off-by-one slice is caught too."""
    pe = getattr(module, "pe", None)
    expect = np.zeros(out.shape[-1])
    expect[1::2] = 1.0                                                        # sin(0), cos(0), sin(0), ...
    if pe is not None and pe.ndim == 2 and pe.shape[-1] == out.shape[-1]:
        if not np.allclose(pe[0], expect, rtol=0, atol=1e-6):
            return "position 0 does not start at sin(0)=0, cos(0)=1 (table row 0 is wrong)"
    x = args[0] if args else None
    if isinstance(x, np.ndarray) and x.shape == out.shape:
        added = out[:, 0, :].astype(np.float64) - x[:, 0, :]                  # (B, D)
        tol = 1e-6 + 4 * np.finfo(out.dtype).eps * (1 + np.abs(x[:, 0, :]).max())
        finite = np.isfinite(added).all(axis=-1)
        if finite.any() and np.abs(added[finite] - expect).max() > tol:
            return "position 0 does not start at sin(0)=0, cos(0)=1 (the forward adds another row at position 0)"
    return ""


def record_forward(t, module, out, args=()):
    """Into trace ``t``, from ``Module.__call__``: the module's output, with the checks that apply to its kind.

    ``args`` are the forward's positional arguments (the positional encoding's check compares its
    output with its input)."""
    if isinstance(out, tuple):
        out = out[0]
    if not isinstance(out, np.ndarray):
        return
    kind = type(module).__name__
    flag = ""
    if kind == "TokenEmbedding":
        flag = _embedding_flag(out)
    elif kind == "PositionalEncoding" and out.ndim == 3 and out.shape[1]:
        flag = _position_flag(module, out, args)
    t.add(_name(module), out, "forward", flag=flag)


def record_embedding(t, module, out, name=None):
    """A scaled token embedding computed outside a :class:`TokenEmbedding` (``TransformerModel`` scales
    its ``embed`` lookup itself): recorded as ``"<embed> * sqrt(d_model)"`` with the std check."""
    if not isinstance(out, np.ndarray):
        return
    name = name or f"{_name(module)} * sqrt(d_model)"
    t.add(name, out, "forward", note="expect std ~1", flag=_embedding_flag(out))


def _input_names(module, n):
    """The first ``n`` argument names of ``module.forward`` (``query, key, value``; ``tgt, memory``)."""
    import inspect
    try:
        names = [p.name for p in inspect.signature(module.forward).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"input {i}" for i in range(len(names), n)])[:n]


def record_backward(t, module, grad):
    """Called after each module's ``backward``: the gradient it returns for its input, or for each of
    its inputs when it returns several (``(dtgt, dmemory)`` of a decoder layer: note ``d tgt``, ``d memory``)."""
    t.backward_modules.append(module)
    if isinstance(grad, tuple):
        arrays = [(i, g) for i, g in enumerate(grad) if isinstance(g, np.ndarray)]
        if len(arrays) > 1:
            names = _input_names(module, len(grad))
            for i, g in arrays:
                t.add(f"{_name(module)}", g, "backward", note=f"d {names[i]}")
            return
        grad = arrays[0][1] if arrays else None
    if isinstance(grad, np.ndarray):
        t.add(f"{_name(module)}", grad, "backward", note="d input")
    elif grad is None:
        # An Embedding has no input gradient: record its weight gradient instead.
        w = getattr(module, "weight", None)
        if w is not None and getattr(w, "grad", None) is not None:
            t.add(f"{_name(module)}.weight", w.grad, "backward", note="d weight")


def record_attention(t, module, cache):
    """Inside multi-head attention: the head split, the scores' range and the softmax row sums."""
    name = _name(module)
    attn = cache.attn
    t.add(f"{name}.q (heads)", attn.q)
    t.add(f"{name}.k (heads)", attn.k)
    t.add(f"{name}.v (heads)", attn.v)
    scores = (attn.q * attn.q.dtype.type(attn.scale)) @ np.swapaxes(attn.k, -1, -2)   # (B, H, S, T)
    factor = applied_scale_factor(attn.q, attn.k, attn.probs)
    flag, note = "", "softmax input vs q k^T / sqrt(Dh): cannot tell (all masked, or a float mask)"
    if factor is not None:
        note = f"softmax input = {factor:.3g} x q k^T / sqrt(Dh)"
        if not 1 / SCALE_TOLERANCE <= factor <= SCALE_TOLERANCE:
            root = np.sqrt(attn.q.shape[-1])
            why = ("missing the 1/sqrt(Dh) scale" if abs(np.log(factor / root)) < np.log(1.1)
                   else "a wrong scale")
            flag = (f"the softmax's scores are {factor:.3g} x q k^T / sqrt(Dh), expected 1 "
                    f"({why}? sqrt(Dh) = {root:.3g})")
    t.add(f"{name}.scores (q k^T / sqrt(Dh))", scores, note=note, flag=flag)
    rows = attn.probs.sum(axis=-1)                                                        # (B, H, S)
    live = rows[rows != 0]                       # rows with every key masked are all-zero by design
    flag = ""
    if live.size and np.abs(live - 1).max() > 1e-3:
        flag = "softmax rows do not sum to 1"
    note = f"row sums in [{live.min():.6f}, {live.max():.6f}]" if live.size else "every row masked"
    t.add(f"{name}.softmax", attn.probs, note=note, flag=flag)


def attention_recorder(t, module):
    """The ``record(name, array)`` callable that :meth:`MultiheadAttention.backward` and
    :meth:`GroupedQueryAttention.backward` hand to the attention backward while a trace is active: it
    records dP, dA, dq, dk, dv with their per-head norms (:func:`._trace_grads.attention_recorder`)."""
    return _trace_grads.attention_recorder(t, _name(module))


def record_residual(t, module, grad, where):
    """A layer's residual stream between its sub-layers: ``grad`` its gradient (phase "backward")."""
    t.add(f"{_name(module)} residual ({where})", grad, "backward", note="d residual stream")


def applied_scale_factor(q, k, probs):
    """How many times ``q k^T / sqrt(Dh)`` the softmax's input was, read off the softmax's output.

    ``log P = A - logsumexp(A)`` row by row, so centred within a row ``log P`` *is* the scores ``A`` the
    softmax saw; the least-squares slope of centred ``log P`` on centred ``q k^T / sqrt(Dh)`` over the
    unmasked pairs (``P > 0``) is 1 when the scale is right and ``sqrt(Dh)`` when it is missing, at any
    step of training (a sharp trained head has large scores, but still a slope of 1). Returns None when
    there is nothing to compare, or when the relation is not a straight line (a float mask that varies
    within rows adds to ``A``: then the slope says nothing).
    """
    tiny = np.finfo(probs.dtype).tiny
    use = probs >= tiny                                                                  # (B, H, S, T)
    intended = (q * q.dtype.type(1 / np.sqrt(q.shape[-1]))) @ np.swapaxes(k, -1, -2)     # (B, H, S, T)
    with np.errstate(divide="ignore"):
        seen = np.log(np.where(use, probs, 1))                                           # (B, H, S, T)
    n = np.maximum(use.sum(axis=-1, keepdims=True), 1)                                   # (B, H, S, 1)
    x = np.where(use, intended - np.where(use, intended, 0).sum(axis=-1, keepdims=True) / n, 0)
    y = np.where(use, seen - seen.sum(axis=-1, keepdims=True) / n, 0)
    sxx, sxy, syy = (float(np.sum(a * b, dtype=np.float64)) for a, b in ((x, x), (x, y), (y, y)))
    if not sxx > 0 or not syy > 0 or not np.isfinite(sxx + sxy + syy):
        return None
    if sxy * sxy < 0.99 * sxx * syy:                                                     # R^2 < 0.99
        return None
    return sxy / sxx


@contextlib.contextmanager
def trace(*modules, keep_arrays=False):
    """Record every sub-module's output (forward) and input gradient (backward) while the block runs.

    Inside attention (standard path of :class:`MultiheadAttention`, and :class:`GroupedQueryAttention`)
    the backward's own intermediates are recorded too: dP (the probabilities' gradient), dA (the
    scores'), dq, dk, dv per head; inside each encoder layer the residual stream's gradient between its
    sub-layers. When the block ends, each layer's input gradient is compared with the top layer's:
    below ``VANISHING_RATIO`` (1e-3) x it is flagged vanishing, above ``EXPLODING_RATIO`` (1e3) exploding.

    Only the calling thread's calls are recorded: a forward or backward another thread runs meanwhile,
    even of these modules, is not (trace a model run in a worker thread from inside that thread).

    Parameters
    ----------
    *modules : Module
        Roots whose sub-modules get qualified names (``encoder.layers.0.self_attn``...) in the records.
    keep_arrays : bool
        Also keep a copy of every recorded array (``record.array``), e.g. to compare one with torch.

    Yields
    ------
    Trace
        ``records``, ``table()``, ``problems()``, ``first_nonfinite()``, ``summary()``, ``report()``.
        When the block ends, if a backward ran in it, every parameter gradient is recorded too
        (phase "parameter").
    """
    for root in modules:
        for name, m in root.named_modules():
            object.__setattr__(m, "_trace_name", name or type(root).__name__)
    current = Trace(keep_arrays=bool(keep_arrays))
    try:
        with hooks.subscribed(_Recorder(current)):      # this thread's: other threads are not recorded
            yield current
    finally:
        _record_parameters(current, modules)
        _trace_grads.flag_layers(current)


class _Recorder(hooks.Subscriber):
    """What a ``with nt.trace(...)`` block subscribes to the core's hooks: each event into its trace."""

    def __init__(self, trace):
        self.trace = trace

    def on_forward(self, module, out, args):
        record_forward(self.trace, module, out, args)

    def on_backward(self, module, grad):
        record_backward(self.trace, module, grad)

    def on_attention(self, module, cache):
        record_attention(self.trace, module, cache)

    def attention_recorder(self, module):
        return attention_recorder(self.trace, module)

    def on_residual(self, module, grad, where):
        record_residual(self.trace, module, grad, where)

    def on_embedding(self, module, out, name=None):
        record_embedding(self.trace, module, out, name)


def _record_parameters(t, roots):
    """After a block in which a backward ran: every parameter's gradient (phase "parameter"), in the
    roots' order (or, with no roots, of the modules whose backward ran), each parameter once."""
    if not t.backward_modules:
        return
    seen = set()
    if roots:
        named = ((f"{type(r).__name__}.{n}" if len(roots) > 1 else n, p)
                 for r in roots for n, p in r.named_parameters())
    else:
        named = (pair for m in t.backward_modules for pair in m.named_parameters(prefix=_name(m)))
    for name, p in named:
        if id(p) in seen or p.grad is None:
            continue
        seen.add(id(p))
        t.add(name, p.grad, "parameter", note="d parameter")
