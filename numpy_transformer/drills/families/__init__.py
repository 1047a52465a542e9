"""Mistake families: the classic mistakes of an op, written once, beside the op, and recognised in
every exercise that contains the op.

An exercise lists its ops in its ``exercise.py`` (``OPS = ("softmax", "attention")``); each op is a
module here (``softmax.py``, ``attention.py`` ...) whose ``FAMILIES`` are :class:`Family` objects. A
family's ``rules`` are regular-expression rewrites (``(pattern, replacement)`` pairs, applied in order)
of the way solutions spell the op; :func:`instantiate` turns them into the plain text patches of one
exercise's ``solution.py`` (a :class:`~numpy_transformer.drills.engine.definition.Mistake`), so the
grader runs a family member exactly as it runs the exercise's own listed mistakes. A rule whose
patterns do not occur in a solution simply does not apply there: dropping softmax's row-sum term is
one family, found in softmax, attention, multi-head, cross-attention, the encoder and decoder layers,
grouped-query attention and the flash backward alike.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from ..engine.definition import Mistake, Patch

#: one way of making a family's mistake: ``(regular expression, replacement)`` rewrites, in order
Rule = Tuple[Tuple[str, str], ...]

#: the ops that have families: every module of this package (found, not listed: a new op's families
#: are a new module here, named in the ``OPS`` of the exercises that contain it)
OP_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


@dataclass(frozen=True)
class Family:
    """A classic mistake of an op: ``rules`` are the alternative ways of writing it (each a sequence
    of regular-expression rewrites of a solution); ``title``, ``explain`` and ``fix`` as a
    :class:`Mistake`'s."""
    id: str
    title: str
    explain: str
    fix: str
    rules: Tuple[Rule, ...]


def concrete(source: str, rule: Rule) -> Optional[Patch]:
    """The text patches that ``rule`` makes of ``source`` (every match of each pattern, in order), or
    None when a pattern does not occur (then the rule does not apply to this solution)."""
    patches = []
    for pattern, replacement in rule:
        rx = re.compile(pattern)
        found = list(rx.finditer(source))
        if not found:
            return None
        seen = set()
        for m in found:
            old = m.group(0)
            if old in seen:
                continue
            seen.add(old)
            new = m.expand(replacement)
            patches.append((old, new))
            source = source.replace(old, new)
    return tuple(patches)


def instantiate(family: Family, source: str) -> Optional[Mistake]:
    """``family`` as a :class:`Mistake` of the solution ``source`` (its rules that apply), or None."""
    configs = []
    for rule in family.rules:
        patches = concrete(source, rule)
        if patches and patches not in configs:
            configs.append(patches)
    if not configs:
        return None
    return Mistake(family.id, family.title, family.explain, family.fix, configs[0], also=tuple(configs[1:]))


def families_of(op: str) -> Tuple[Family, ...]:
    """The families of ``op`` (its module's ``FAMILIES``)."""
    if op not in OP_MODULES:
        raise ValueError(f"op: got {op!r}, expected one of {', '.join(OP_MODULES)}")
    return importlib.import_module(f"{__name__}.{op}").FAMILIES


def for_exercise(ops: Sequence[str], source: str, listed: Sequence[Mistake]) -> Tuple[Mistake, ...]:
    """The family mistakes of ``ops`` that apply to the solution ``source``, minus those the exercise
    already lists (the same id, or the same patches as a listed mistake)."""
    taken = {m.id for m in listed}
    listed_configs = {cfg for m in listed for cfg in m.configs}
    out: Dict[str, Mistake] = {}
    for op in ops:
        for fam in families_of(op):
            if fam.id in taken or fam.id in out:
                continue
            m = instantiate(fam, source)
            if m is None:
                continue
            configs = tuple(c for c in m.configs if c not in listed_configs)
            if configs:
                out[fam.id] = Mistake(m.id, m.title, m.explain, m.fix, configs[0], also=configs[1:])
    return tuple(out.values())
