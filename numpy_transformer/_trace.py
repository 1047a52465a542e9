"""Recording of every sub-layer's output during a forward (used by ``nt.trace`` and the demo).

Kept tiny and off the hot path: modules call :func:`active` (one global lookup) before recording.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

_ACTIVE: Optional["Trace"] = None


@dataclass
class Record:
    """Statistics of one traced array."""
    name: str
    shape: tuple
    dtype: str
    mean: float
    std: float
    min: float
    max: float
    note: str = ""


@dataclass
class Trace:
    """The records of one ``with nt.trace(...)`` block, in execution order."""
    records: List[Record] = field(default_factory=list)

    def add(self, name, array, note=""):
        a = np.asarray(array)
        finite = a[np.isfinite(a)] if a.size else a
        stats = (float(finite.mean()), float(finite.std()), float(finite.min()), float(finite.max())) \
            if finite.size else (float("nan"),) * 4
        if a.size and finite.size != a.size:
            note = (note + "; " if note else "") + f"{a.size - finite.size} non-finite"
        self.records.append(Record(name, tuple(a.shape), str(a.dtype), *stats, note))

    def table(self):
        """The records as an aligned text table."""
        head = f"{'step':<44} {'shape':<18} {'dtype':<8} {'mean':>10} {'std':>10} {'min':>10} {'max':>10}  note"
        rows = [head, "-" * len(head)]
        for r in self.records:
            rows.append(f"{r.name:<44} {str(r.shape):<18} {r.dtype:<8} {r.mean:>10.4f} {r.std:>10.4f} "
                        f"{r.min:>10.4f} {r.max:>10.4f}  {r.note}")
        return "\n".join(rows)


def active():
    return _ACTIVE is not None


def _name(module):
    return getattr(module, "_trace_name", None) or type(module).__name__


def record_forward(module, out):
    if isinstance(out, tuple):
        out = out[0]
    if isinstance(out, np.ndarray):
        _ACTIVE.add(_name(module), out)


def record_attention(module, cache):
    """Inside multi-head attention: the head split, the scores' range and the softmax row sums."""
    name = _name(module)
    attn = cache.attn
    _ACTIVE.add(f"{name}.q (heads)", attn.q)
    _ACTIVE.add(f"{name}.k (heads)", attn.k)
    _ACTIVE.add(f"{name}.v (heads)", attn.v)
    scores = (attn.q * attn.q.dtype.type(attn.scale)) @ np.swapaxes(attn.k, -1, -2)
    _ACTIVE.add(f"{name}.scores (q k^T / sqrt(Dh))", scores, "expect about [-10, 10]")
    rows = attn.probs.sum(axis=-1)
    _ACTIVE.add(f"{name}.softmax", attn.probs,
                f"row sums in [{rows.min():.6f}, {rows.max():.6f}]")


@contextlib.contextmanager
def trace(*modules):
    """Record every sub-module's output (shape, dtype, mean, std, min, max) while the block runs.

    Parameters
    ----------
    *modules : Module
        Roots whose sub-modules get qualified names (``self_attn``, ``linear1``...) in the records.

    Yields
    ------
    Trace
        ``trace.records`` and ``trace.table()``.
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
