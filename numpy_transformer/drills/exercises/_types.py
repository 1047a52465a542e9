"""The drills' data types (:class:`Mistake`, :class:`Case`, :class:`Exercise`) and the helpers every
exercise module shares. Re-exported by :mod:`numpy_transformer.drills.exercises`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np


@dataclass(frozen=True)
class Mistake:
    """A classic mistake: ``configs`` are knob settings of the exercise's variant that reproduce it."""
    id: str
    title: str
    explain: str
    fix: str
    configs: Tuple[dict, ...]


@dataclass
class Case:
    inputs: dict
    desc: str
    tags: List[str] = field(default_factory=list)
    factors: Dict[str, float] = field(default_factory=dict)
    #: the case's options, for "fails only ..." (``{"norm_first": "pre-LN"}`` -> "with pre-LN", ``{"X":
    #: True}`` -> "with X"); the grader adds the other scalar inputs (``approximate``, ``causal`` ...),
    #: whether each optional array was given, and the tags
    options: Dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Exercise:
    name: str
    difficulty: str                       # easy / medium / hard
    minutes: int                          # a fair interview target
    covers: str                           # one line for `drill list`
    functions: Tuple[str, ...]
    outputs: Tuple[Tuple[str, str], ...]  # (output name, function that returns it)
    library: Tuple[str, ...]              # functional.* whose docstrings carry the derivation
    draw: Callable[[np.random.Generator, int], Case]
    run: Callable
    reference: Callable[[], object]
    variant: Callable[..., object]
    mistakes: Tuple[Mistake, ...]
    exception_hints: Tuple[Tuple[str, str], ...] = ()
    n_edge: int = 0
    reference_name: str = "numpy_transformer.functional (verified)"
    #: the interview topic `drill list` shows (empty: :data:`~numpy_transformer.drills.exercises.TOPICS`)
    topic: str = ""
    #: for the gradient check of the candidate's own forward: ``{"loss": forward output, "upstream":
    #: input holding its upstream gradient, "grads": {gradient output: input path}}`` (a path is
    #: ``"x"`` or ``"params.W1"``); None: inferred from the names (``dx`` <- ``x``, ``grads[K]`` <-
    #: ``params.K``, the upstream is the ``d*`` input shaped like the first output)
    grad_check: Optional[dict] = None

    def mistake(self, mistake_id):
        for m in self.mistakes:
            if m.id == mistake_id:
                return m
        raise KeyError(mistake_id)


def _shape(a):
    return "(" + ", ".join(str(n) for n in a.shape) + ")"


def _desc(*parts):
    return "  ".join(p for p in parts if p)


class _Missing:
    """What a run records for an output the user's function did not return (a key absent from a dict)."""

    def __repr__(self):
        return "<missing>"


MISSING = _Missing()
