"""The drills' exercises: one folder each, found here, never listed.

An exercise ``NAME`` is the folder ``exercises/NAME/`` holding

* ``skeleton.py`` — what ``drill start`` writes (exact signatures, shapes, no solution);
* ``solution.py`` — the one NumPy solution the exercise shows (``drill solution`` prints it);
* ``mistakes.py`` — ``MISTAKES``: its classic mistakes, each a source patch of ``solution.py``
  (:class:`~numpy_transformer.drills.engine.definition.Mistake`);
* ``exercise.py`` — ``EXERCISE`` (what it asks, ``draw``, ``run``, ``reference``), ``ORDER`` (its place in
  ``drill list``) and ``ORACLE`` (how ``reference_torch.drill_oracle`` re-checks the reference with torch);
* ``derivation.md`` — the derivation a candidate needs for this exercise (its own functions and
  quantities), which ``drill solution`` prints after the solution;
* ``README.md`` (its page: functions, what it covers, its mistakes) and ``via_library.py`` (the library
  through the skeleton's signatures), which the tests read.

:func:`discover` imports every folder of :data:`SEARCH_PATH` that has an ``exercise.py``; :data:`EXERCISES`
is the result, in ``ORDER``. The recipe for adding one is in docs/drills.md ("Adding an exercise").
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import replace
from typing import Dict, Optional

import numpy as np

from ..engine.definition import MISSING, Case, Exercise, Missing, Mistake, describe, shape_text
from ..engine.upstream import replace_upstream
from ..families import for_exercise

__all__ = ["REQUIRED_FILES", "SEARCH_PATH", "discover", "topic_of", "Mistake", "Case", "Exercise", "MISSING",
           "Missing", "EXERCISES", "ALIASES", "get", "draw_case", "describe", "shape_text"]

#: the files every exercise folder has
REQUIRED_FILES = ("exercise.py", "skeleton.py", "solution.py", "mistakes.py", "derivation.md")

#: where :func:`discover` looks: ``(folder, package it is importable as)``
SEARCH_PATH = [(os.path.dirname(os.path.abspath(__file__)), __name__)]


def discover(search_path=None) -> Dict[str, Exercise]:
    """Every exercise folder of ``search_path`` (default :data:`SEARCH_PATH`), by name, in ``ORDER``.

    A folder is an exercise when it has an ``exercise.py``; it must then have all of
    :data:`REQUIRED_FILES`, its ``EXERCISE.name`` must be the folder's name, and its ``ORDER`` unique.
    """
    found = []
    for folder, package in (SEARCH_PATH if search_path is None else search_path):
        for info in sorted(pkgutil.iter_modules([folder]), key=lambda i: i.name):
            path = os.path.join(folder, info.name)
            if not info.ispkg or not os.path.isfile(os.path.join(path, "exercise.py")):
                continue
            missing = [f for f in REQUIRED_FILES if not os.path.isfile(os.path.join(path, f))]
            if missing:
                raise RuntimeError(f"exercise folder {path} lacks {', '.join(missing)}")
            module = importlib.import_module(f"{package}.{info.name}.exercise")
            mistakes = importlib.import_module(f"{package}.{info.name}.mistakes").MISTAKES
            ex = module.EXERCISE
            if ex.name != info.name:
                raise RuntimeError(f"{path}/exercise.py: EXERCISE.name is {ex.name!r}, expected {info.name!r}")
            ops = tuple(getattr(module, "OPS", ()))
            with open(os.path.join(path, "solution.py"), encoding="utf-8") as fh:
                families = for_exercise(ops, fh.read(), mistakes)
            found.append(replace(ex, mistakes=tuple(mistakes), families=families, ops=ops, folder=path,
                                 order=module.ORDER, oracle=getattr(module, "ORACLE", None),
                                 localise=getattr(module, "LOCALISE", None)))
    found.sort(key=lambda e: e.order)
    orders = [e.order for e in found]
    if len(set(orders)) != len(orders):
        raise RuntimeError(f"two exercises share an ORDER: {sorted(orders)}")
    return {e.name: e for e in found}


EXERCISES = discover()

#: another name for an exercise (``drill start mha``): each exercise's ``aliases``
ALIASES = {alias: e.name for e in EXERCISES.values() for alias in e.aliases}


def topic_of(ex):
    """The interview topic `drill list` shows for ``ex``."""
    return ex.topic or "-"


def get(name) -> Optional[Exercise]:
    """The exercise called ``name`` (or one of its aliases), else None."""
    name = (name or "").strip().lower().replace("-", "_")
    name = ALIASES.get(name, name)
    return EXERCISES.get(name)


def draw_case(exercise, seed, i):
    """Case ``i`` of ``exercise`` for ``seed``: deterministic, independent of the other cases; its upstream
    gradients (``dy``, ``dout``, ``dbias``) come from a stream of their own (:mod:`..engine.upstream`)."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(i), len(exercise.name)])
    # the upstream gradient from a stream of its own, never parallel to an input (see engine/upstream.py)
    return replace_upstream(exercise.draw(rng, i), seed, i, exercise.name)
