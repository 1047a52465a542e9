"""Trace mode: record every sub-layer's output on the forward and its input gradient on the backward,
with the seed design's health checks (its "dimension tracking" table).

Usage::

    with nt.trace(model) as t:
        y = model(x)
        model.backward(dy)
    print(t.table())          # one row per sub-layer and direction, abnormal values flagged
    t.problems()              # just the flagged rows

Kept off the hot path: modules call :func:`active` (one global lookup) before recording anything.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

_ACTIVE: Optional["Trace"] = None

# Thresholds of the health checks (the seed design's "normal range" column).
SCORE_LIMIT = 10.0            # |q k^T / sqrt(Dh)| beyond this: the 1/sqrt(Dh) scale is probably missing
EMBEDDING_STD_RANGE = (0.5, 2.0)   # scaled token embedding std; ~1 expected, ~1/sqrt(D) if sqrt(D) is missing
EXPLODING_GRAD = 1e4          # a gradient entry larger than this is flagged as exploding


@dataclass
class Record:
    """Statistics of one traced array. ``phase`` is "forward" or "backward"; ``flag`` names a problem."""
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


@dataclass
class Trace:
    """The records of one ``with nt.trace(...)`` block, in execution order."""
    records: List[Record] = field(default_factory=list)

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
            flag = _join(flag, f"{n_bad} NaN/inf values")
        record = Record(name, phase, tuple(a.shape), str(a.dtype), *stats, note, flag)
        if phase == "backward" and a.size and not n_bad:
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

    def table(self, phase=None):
        """The records (optionally one phase only) as an aligned text table, flags in the last column."""
        width = max([44] + [len(r.name) + 1 for r in self.records])
        head = (f"{'step':<{width}} {'dir':<4} {'shape':<18} {'dtype':<8} {'mean':>10} {'std':>10} "
                f"{'min':>10} {'max':>10}  note")
        rows = [head, "-" * len(head)]
        for r in self.records:
            if phase is not None and r.phase != phase:
                continue
            note = _join(r.note, f"!! {r.flag}" if r.flag else "")
            rows.append(f"{r.name:<{width}} {'fwd' if r.phase == 'forward' else 'bwd':<4} {str(r.shape):<18} "
                        f"{r.dtype:<8} {r.mean:>10.4f} {r.std:>10.4f} {r.min:>10.4f} {r.max:>10.4f}  {note}")
        return "\n".join(rows)


def _join(a, b):
    return f"{a}; {b}" if a and b else (a or b)


def active():
    return _ACTIVE is not None


def _name(module):
    return getattr(module, "_trace_name", None) or type(module).__name__


def record_forward(module, out):
    """Called by ``Module.__call__``: the module's output, with the checks that apply to its kind."""
    if isinstance(out, tuple):
        out = out[0]
    if not isinstance(out, np.ndarray):
        return
    kind = type(module).__name__
    flag = ""
    if kind == "TokenEmbedding":
        lo, hi = EMBEDDING_STD_RANGE
        std = float(out.std()) if out.size else 1.0
        if not lo <= std <= hi:
            flag = f"embedding std {std:.3g} far from 1 (missing the sqrt(d_model) scale?)"
    elif kind == "PositionalEncoding" and out.ndim == 3 and out.shape[1] and hasattr(module, "pe"):
        if module.pe[0, 0] != 0 or (module.pe.shape[1] > 1 and module.pe[0, 1] != 1):
            flag = "position 0 does not start at sin(0)=0, cos(0)=1"
    _ACTIVE.add(_name(module), out, "forward", flag=flag)


def record_backward(module, grad):
    """Called after each module's ``backward``: the gradient it returns (for its first input)."""
    if isinstance(grad, tuple):
        grad = next((g for g in grad if isinstance(g, np.ndarray)), None)
    if isinstance(grad, np.ndarray):
        _ACTIVE.add(f"{_name(module)}", grad, "backward", note="d input")
    elif grad is None:
        # An Embedding has no input gradient: record its weight gradient instead.
        w = getattr(module, "weight", None)
        if w is not None and getattr(w, "grad", None) is not None:
            _ACTIVE.add(f"{_name(module)}.weight", w.grad, "backward", note="d weight")


def record_attention(module, cache):
    """Inside multi-head attention: the head split, the scores' range and the softmax row sums."""
    name = _name(module)
    attn = cache.attn
    _ACTIVE.add(f"{name}.q (heads)", attn.q)
    _ACTIVE.add(f"{name}.k (heads)", attn.k)
    _ACTIVE.add(f"{name}.v (heads)", attn.v)
    scores = (attn.q * attn.q.dtype.type(attn.scale)) @ np.swapaxes(attn.k, -1, -2)   # (B, H, S, T)
    finite = scores[np.isfinite(scores)]
    flag = ""
    if finite.size and np.abs(finite).max() > SCORE_LIMIT:
        flag = (f"scores reach {np.abs(finite).max():.3g}, outside [-{SCORE_LIMIT:g}, {SCORE_LIMIT:g}] "
                "(missing the 1/sqrt(Dh) scale?)")
    _ACTIVE.add(f"{name}.scores (q k^T / sqrt(Dh))", scores, note="expect within [-10, 10]", flag=flag)
    rows = attn.probs.sum(axis=-1)                                                        # (B, H, S)
    live = rows[rows != 0]                       # rows with every key masked are all-zero by design
    flag = ""
    if live.size and np.abs(live - 1).max() > 1e-3:
        flag = "softmax rows do not sum to 1"
    note = f"row sums in [{live.min():.6f}, {live.max():.6f}]" if live.size else "every row masked"
    _ACTIVE.add(f"{name}.softmax", attn.probs, note=note, flag=flag)


@contextlib.contextmanager
def trace(*modules):
    """Record every sub-module's output (forward) and input gradient (backward) while the block runs.

    Parameters
    ----------
    *modules : Module
        Roots whose sub-modules get qualified names (``encoder.layers.0.self_attn``...) in the records.

    Yields
    ------
    Trace
        ``records``, ``table()``, ``problems()`` and ``first_nonfinite()``.
    """
    global _ACTIVE
    for root in modules:
        for name, m in root.named_modules():
            object.__setattr__(m, "_trace_name", name or type(root).__name__)
    previous, _ACTIVE = _ACTIVE, Trace()
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = previous
