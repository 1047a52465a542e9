"""The SECOND held-out set of unlisted drill mistakes (``tests/drills/fresh/``), issue 24.

The first set (``tests/drills/unlisted/``) has been read by the engineers improving the diagnoses, so
it no longer measures them blind. This one was written apart from the grader's list of known mistakes
and from that work, as candidates who never saw either would write their wrong answers, and repeats
none of the first set's mistakes. The same three checks, with the same helpers:

* every from-scratch correct solution (``CORRECT``) PASSES ``drill check``;
* every mistake (``MISTAKES``, a text patch of the exercise's solution.py) is CAUGHT: the check fails;
* the naming rate: a mistake is *named* when the first diagnosis bullet of the report contains one of
  its keywords (case-insensitive) in what it names and is not the "no known mistake explains this
  failure" line. The goal is the first set's (``NAMING_GOAL``); the table of misses is printed (and
  written to the file ``NT_FRESH_TABLE`` names, when set).
"""

from __future__ import annotations

import importlib

import pytest

import numpy_transformer.drills as drills
from tests.drills import heldout
from tests.drills.drill_helpers import check_inprocess, solution_source
from tests.drills.test_drill_unlisted import CASES, NAMING_GOAL, apply_once

NAMES = sorted(drills.EXERCISES)


def fresh(name):
    """The data module ``tests/drills/fresh/<name>.py``."""
    return importlib.import_module(f"tests.drills.fresh.{name}")


ALL_MISTAKES = [(name, i) for name in NAMES for i in range(len(fresh(name).MISTAKES))]


@pytest.fixture(scope="session")
def fresh_reports(tmp_path_factory):
    """Where each graded mistake's (status, report) is kept for this session, shared by the pytest-xdist
    workers (their base directories share a parent, fresh per session), so that the rate test reads what
    the per-mistake tests graded."""
    return heldout.reports_root(tmp_path_factory, "drill_fresh_reports")


def graded(name, index, reports):
    """(exit status, report) of one mistake of the second set, graded once per session."""
    return heldout.graded(fresh(name), name, index, reports)


def test_the_second_set_covers_every_exercise_with_new_mistakes():
    total = 0
    for name in NAMES:
        data = fresh(name)
        assert 4 <= len(data.MISTAKES) <= 6, name
        first = {tuple(map(tuple, m["patch"])) for m in importlib.import_module(
            f"tests.drills.unlisted.{name}").MISTAKES}
        for m in data.MISTAKES:
            assert m["label"] and 2 <= len(m["keywords"]) <= 4 and m["patch"], (name, m)
            patched = apply_once(solution_source(name), m["patch"])
            assert patched != solution_source(name), (name, m["label"])
            assert tuple(map(tuple, m["patch"])) not in first, (name, m["label"])
        total += len(data.MISTAKES)
        assert "def " in data.CORRECT and data.CORRECT != solution_source(name), name
        assert data.CORRECT != importlib.import_module(f"tests.drills.unlisted.{name}").CORRECT, name
    assert total >= 110, total


@pytest.mark.parametrize("name", NAMES)
def test_second_set_correct_solution_passes(name, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(fresh(name).CORRECT)
    rc, out = check_inprocess(path, exercise=name, cases=CASES)
    assert rc == 0, out
    assert out.rstrip().endswith("PASS"), out


@pytest.mark.parametrize("name,index", ALL_MISTAKES, ids=[f"{n}-{i}" for n, i in ALL_MISTAKES])
def test_second_set_mistake_is_caught(name, index, fresh_reports):
    rc, out = graded(name, index, fresh_reports)
    label = fresh(name).MISTAKES[index]["label"]
    assert rc == 1, f"{name}: {label!r} was not caught\n{out}"
    assert "FAIL" in out, out


def test_second_set_mistakes_are_named_at_the_goal_rate(fresh_reports):
    rate, misses, table = heldout.rate_table(fresh, ALL_MISTAKES, fresh_reports, "second held-out set",
                                             "NT_FRESH_TABLE")
    print("\n" + table)
    assert rate >= NAMING_GOAL, f"named {rate:.1%} < {NAMING_GOAL:.0%}: {len(misses)} misses"
