"""The THIRD held-out set of unlisted drill mistakes (``tests/drills/third/``), issue 24.

The first two sets (``tests/drills/unlisted/`` and ``tests/drills/fresh/``) have been used to
improve the diagnoses, so they no longer measure them blind. This one was written without reading
the grader's list of known mistakes, its diagnosis code or that work, as candidates who never saw
them would write their wrong answers, and repeats none of the first two sets' mistakes. The same
three checks, with the same helpers:

* every from-scratch correct solution (``CORRECT``) PASSES ``drill check``;
* every mistake (``MISTAKES``, a text patch of the exercise's solution.py) is CAUGHT: the check fails;
* the naming rate: a mistake is *named* when the first diagnosis bullet of the report contains one of
  its keywords (case-insensitive) in what it names and is not the "no known mistake explains this
  failure" line. The goal is the first set's (``NAMING_GOAL``); the table of misses is printed, and
  written with the audit section of named bullets to the file ``NT_THIRD_TABLE`` names, when set.
  The rate was measured blind (the set was not tuned to the grader), hence a non-strict xfail.
"""

from __future__ import annotations

import importlib

import pytest

import numpy_transformer.drills as drills
from tests.drills import heldout
from tests.drills.drill_helpers import check_inprocess, solution_source
from tests.drills.test_drill_unlisted import CASES, NAMING_GOAL, apply_once

NAMES = sorted(drills.EXERCISES)


def third(name):
    """The data module ``tests/drills/third/<name>.py``."""
    return importlib.import_module(f"tests.drills.third.{name}")


def earlier_patches(name):
    """The patches of the first two sets for one exercise, as hashable tuples."""
    return {tuple(map(tuple, m["patch"]))
            for kind in ("unlisted", "fresh")
            for m in importlib.import_module(f"tests.drills.{kind}.{name}").MISTAKES}


ALL_MISTAKES = [(name, i) for name in NAMES for i in range(len(third(name).MISTAKES))]


@pytest.fixture(scope="session")
def third_reports(tmp_path_factory):
    """Where each graded mistake's (status, report) is kept for this session, shared by the pytest-xdist
    workers (their base directories share a parent, fresh per session), so that the rate test reads what
    the per-mistake tests graded."""
    return heldout.reports_root(tmp_path_factory, "drill_third_reports")


def graded(name, index, reports):
    """(exit status, report) of one mistake of the third set, graded once per session."""
    return heldout.graded(third(name), name, index, reports)


def test_the_third_set_covers_every_exercise_with_new_mistakes():
    total = 0
    for name in NAMES:
        data = third(name)
        assert len(data.MISTAKES) == 4, name
        before = earlier_patches(name)
        for m in data.MISTAKES:
            assert m["label"] and 2 <= len(m["keywords"]) <= 4 and m["patch"], (name, m)
            patched = apply_once(solution_source(name), m["patch"])
            assert patched != solution_source(name), (name, m["label"])
            assert tuple(map(tuple, m["patch"])) not in before, (name, m["label"])
        total += len(data.MISTAKES)
        assert "def " in data.CORRECT and data.CORRECT != solution_source(name), name
        for kind in ("unlisted", "fresh"):
            assert data.CORRECT != importlib.import_module(f"tests.drills.{kind}.{name}").CORRECT, name
    assert total == 4 * len(NAMES), total                  # 26 exercises: 104 mistakes


@pytest.mark.parametrize("name", NAMES)
def test_third_set_correct_solution_passes(name, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(third(name).CORRECT)
    rc, out = check_inprocess(path, exercise=name, cases=CASES)
    assert rc == 0, out
    assert out.rstrip().endswith("PASS"), out


@pytest.mark.parametrize("name,index", ALL_MISTAKES, ids=[f"{n}-{i}" for n, i in ALL_MISTAKES])
def test_third_set_mistake_is_caught(name, index, third_reports):
    rc, out = graded(name, index, third_reports)
    label = third(name).MISTAKES[index]["label"]
    assert rc == 1, f"{name}: {label!r} was not caught\n{out}"
    assert "FAIL" in out, out


@pytest.mark.xfail(strict=False, reason="the third held-out set: measured blind")
def test_third_set_mistakes_are_named_at_the_goal_rate(third_reports):
    rate, misses, table = heldout.rate_table(third, ALL_MISTAKES, third_reports, "third held-out set",
                                             "NT_THIRD_TABLE")
    print("\n" + table)
    assert rate >= NAMING_GOAL, f"named {rate:.1%} < {NAMING_GOAL:.0%}: {len(misses)} misses"
