"""The drills' data types (:class:`Mistake`, :class:`Case`, :class:`Exercise`) and the helpers every
exercise shares. Re-exported by :mod:`numpy_transformer.drills.exercises`.

An exercise is a folder (see docs/drills.md, "Adding an exercise"); its classic mistakes are source
patches of its one solution, ``solution.py``: :meth:`Exercise.variant` applies them and runs the result,
so the NumPy code a mistake is recognised by is the solution the user is shown, one line changed."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from .patching import exec_source

#: a source patch: ``(text in solution.py, what a person making the mistake writes instead)``, applied in order
Patch = Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class Mistake:
    """A classic mistake: ``patches`` turn the exercise's ``solution.py`` into the code a person making it
    writes (each ``(old, new)`` replaces every occurrence of ``old``); ``also``: other patches that make
    the same mistake another way (``axis=0`` or ``axis=-2`` for "the wrong axis")."""
    id: str
    title: str
    explain: str
    fix: str
    patches: Patch
    also: Tuple[Patch, ...] = ()

    def __post_init__(self):
        # hashable, whatever the mistakes.py wrote (lists read better there)
        object.__setattr__(self, "patches", tuple(tuple(p) for p in self.patches))
        object.__setattr__(self, "also", tuple(tuple(tuple(p) for p in alt) for alt in self.also))

    @property
    def configs(self) -> Tuple[Patch, ...]:
        """Every way of making the mistake: ``patches`` first, then ``also``."""
        return (self.patches,) + self.also


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


#: ``(id prefix, finder(exercise, mistake_id) -> Mistake)``: mistakes made on demand rather than listed
#: (``mutants.py`` adds its own when imported; the judge imports it)
MISTAKE_FINDERS: list = []


@dataclass(frozen=True)
class Exercise:
    name: str
    difficulty: str                       # easy / medium / hard
    minutes: int                          # a fair interview target
    covers: str                           # one line for `drill list`
    functions: Tuple[str, ...]
    outputs: Tuple[Tuple[str, str], ...]  # (output name, function that returns it)
    library: Tuple[str, ...]              # the library functions it matches (derivation.md derives them)
    draw: Callable[[np.random.Generator, int], Case]
    run: Callable
    reference: Callable[[], object]
    #: the classic mistakes (the folder's ``mistakes.py``: :data:`MISTAKES`; set by the registry)
    mistakes: Tuple[Mistake, ...] = ()
    #: the mistake families of the ops it contains (``drills/families/``), as patches of its solution
    #: (set by the registry from the folder's ``OPS``); recognised as the listed ones are
    families: Tuple[Mistake, ...] = ()
    #: the ops it contains (the folder's ``OPS``)
    ops: Tuple[str, ...] = ()
    #: its sub-blocks, for localising a failure (the folder's ``LOCALISE``; see :mod:`.localise`):
    #: ``{"switch_off": ((sub-block, input edits), ...), "backward": ((sub-block, gradients), ...)}``
    localise: Optional[dict] = None
    exception_hints: Tuple[Tuple[str, str], ...] = ()
    n_edge: int = 0
    reference_name: str = "numpy_transformer.functional (verified)"
    #: the interview topic `drill list` shows ("-" when empty)
    topic: str = ""
    #: other names `drill start` accepts (``("mha",)``)
    aliases: Tuple[str, ...] = ()
    #: for the gradient check of the candidate's own forward: ``{"loss": forward output, "upstream":
    #: input holding its upstream gradient, "grads": {gradient output: input path}}`` (a path is
    #: ``"x"`` or ``"params.W1"``); None: inferred from the names (``dx`` <- ``x``, ``grads[K]`` <-
    #: ``params.K``, the upstream is the ``d*`` input shaped like the first output)
    grad_check: Optional[dict] = None
    #: the exercise's folder (``skeleton.py``, ``solution.py`` ...; set by the registry)
    folder: str = ""
    #: its place in `drill list` (the folder's ``ORDER``; set by the registry)
    order: float = 0
    #: how torch re-checks the reference (the folder's ``ORACLE``, read by ``reference_torch.drill_oracle``)
    oracle: Optional[dict] = None

    @property
    def known(self) -> Tuple[Mistake, ...]:
        """Every mistake the grader recognises: the listed ones first, then the families'."""
        return self.mistakes + self.families

    def mistake(self, mistake_id):
        """The known mistake called ``mistake_id``, or one a registered finder makes (the mutants of the
        solution, :mod:`.mutants`, register theirs: this module stays below them)."""
        for m in self.known:
            if m.id == mistake_id:
                return m
        for prefix, find in MISTAKE_FINDERS:
            if mistake_id.startswith(prefix):
                return find(self, mistake_id)
        raise KeyError(mistake_id)

    @property
    def skeleton_path(self) -> str:
        """The file ``drill start`` writes."""
        return os.path.join(self.folder, "skeleton.py")

    @property
    def solution_path(self) -> str:
        """The one NumPy solution: ``drill solution`` prints it, the mistakes patch it."""
        return os.path.join(self.folder, "solution.py")

    @property
    def derivation_path(self) -> str:
        """The derivation ``drill solution`` prints after the solution: the exercise's own, not a docstring."""
        return os.path.join(self.folder, "derivation.md")

    def variant(self, *patches: Patch):
        """The solution with ``patches`` applied (one or several mistakes' ``configs``), as a namespace of
        its functions; with none, the solution itself. None when two patches collide (the second's text is
        no longer there after the first)."""
        return _patched_solution(self.solution_path, tuple(p for patch in patches for p in patch))


def apply_patches(source: str, patches: Patch) -> Optional[str]:
    """``source`` with each ``(old, new)`` of ``patches`` applied in order; None when an ``old`` is absent."""
    for old, new in patches:
        if old not in source:
            return None
        source = source.replace(old, new)
    return source


@functools.lru_cache(maxsize=512)
def _patched_solution(path, patches):
    with open(path, encoding="utf-8") as fh:
        source = apply_patches(fh.read(), patches)
    if source is None:
        return None
    namespace = {"__name__": "_drill_variant", "__file__": path}
    exec_source(source, path, namespace)   # our own solution.py, patched by our own mistakes.py
    return SimpleNamespace(**{k: v for k, v in namespace.items() if callable(v) and not k.startswith("__")})


def shape_text(a) -> str:
    """``"(2, 3)"``: the shape of ``a`` as the case descriptions write it."""
    return "(" + ", ".join(str(n) for n in a.shape) + ")"


def describe(*parts) -> str:
    """A case's description: the non-empty ``parts``, two spaces apart."""
    return "  ".join(p for p in parts if p)


class Missing:
    """What a run records for an output the user's function did not return (a key absent from a dict)."""

    def __repr__(self):
        return "<missing>"


MISSING = Missing()
