"""The drills' exercises are folders that are found, not listed (issue 23).

* a folder dropped on the search path is an exercise, with no other edit;
* every exercise folder has the required files, and its name, order and oracle;
* each mistake is a patch of that folder's solution: the patched solution differs from it and fails the
  grading, the solution itself passes;
* no file names the exercises by hand: not the registry, not the torch oracle.
"""

from __future__ import annotations

import io
import os
import re
import textwrap

import numpy as np
import pytest
from _paths import REPO_ROOT

import numpy_transformer.drills as drills
from numpy_transformer.drills import exercises
from numpy_transformer.drills.engine import diagnose
from numpy_transformer.drills.engine.definition import apply_patches
from numpy_transformer.drills.engine.judge import grade_case

ROOT = str(REPO_ROOT)
NAMES = list(drills.EXERCISES)


def _fake_exercise(root, name="fake_drill", order=10_000):
    """A package ``fakepkg_<name>`` at ``root`` holding one exercise folder ``name``: softmax's, renamed
    (a package name of its own per test: ``sys.modules`` keeps what an earlier test imported)."""
    pkg = root / f"fakepkg_{name}"
    folder = pkg / name
    folder.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    soft = drills.EXERCISES["softmax"].folder
    for f in ("skeleton.py", "solution.py", "derivation.md"):
        (folder / f).write_text(open(os.path.join(soft, f), encoding="utf-8").read())
    (folder / "exercise.py").write_text(textwrap.dedent(f"""\
        from dataclasses import replace
        from numpy_transformer.drills.exercises.softmax.exercise import EXERCISE as SOFTMAX, ORACLE
        ORDER = {order}
        EXERCISE = replace(SOFTMAX, name={name!r}, aliases=())
        """))
    (folder / "mistakes.py").write_text(
        "from numpy_transformer.drills.exercises.softmax.mistakes import MISTAKES\n")
    return pkg


def test_a_dropped_in_folder_is_discovered(tmp_path, monkeypatch):
    pkg = _fake_exercise(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(exercises, "SEARCH_PATH", exercises.SEARCH_PATH + [(str(pkg), pkg.name)])
    found = exercises.discover()
    assert list(found)[:-1] == NAMES and list(found)[-1] == "fake_drill"      # in ORDER: last
    ex = found["fake_drill"]
    assert ex.folder == str(pkg / "fake_drill") and ex.order == 10_000
    assert ex.solution_path == str(pkg / "fake_drill" / "solution.py")
    assert [m.id for m in ex.mistakes] == [m.id for m in drills.EXERCISES["softmax"].mistakes]
    assert ex.oracle == drills.EXERCISES["softmax"].oracle


def test_a_folder_lacking_a_file_or_misnamed_is_refused(tmp_path, monkeypatch):
    pkg = _fake_exercise(tmp_path, name="broken_drill")
    monkeypatch.syspath_prepend(str(tmp_path))
    (pkg / "broken_drill" / "mistakes.py").unlink()
    with pytest.raises(RuntimeError, match=r"broken_drill lacks mistakes\.py"):
        exercises.discover([(str(pkg), pkg.name)])
    (pkg / "broken_drill" / "mistakes.py").write_text("MISTAKES = ()\n")
    derivation = (pkg / "broken_drill" / "derivation.md").read_text()
    (pkg / "broken_drill" / "derivation.md").unlink()
    with pytest.raises(RuntimeError, match=r"broken_drill lacks derivation\.md"):
        exercises.discover([(str(pkg), pkg.name)])
    (pkg / "broken_drill" / "derivation.md").write_text(derivation)
    (pkg / "broken_drill" / "exercise.py").write_text(
        (pkg / "broken_drill" / "exercise.py").read_text().replace("'broken_drill'", "'other_name'"))
    with pytest.raises(RuntimeError, match=r"EXERCISE.name is 'other_name', expected 'broken_drill'"):
        exercises.discover([(str(pkg), pkg.name)])


def test_a_shared_order_is_refused(tmp_path, monkeypatch):
    pkg = _fake_exercise(tmp_path, name="twin_drill", order=drills.EXERCISES["softmax"].order)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="two exercises share an ORDER"):
        exercises.discover(exercises.SEARCH_PATH + [(str(pkg), pkg.name)])


@pytest.mark.parametrize("name", NAMES)
def test_every_folder_has_the_required_files(name):
    ex = drills.EXERCISES[name]
    assert os.path.basename(ex.folder) == name
    for f in exercises.REQUIRED_FILES + ("README.md", "__init__.py", "via_library.py"):
        assert os.path.isfile(os.path.join(ex.folder, f)), f"{name}/{f}"
    assert ex.oracle and ("adapter" in ex.oracle or {"op", "inputs", "upstream", "outputs"} <= set(ex.oracle))
    assert ex.mistakes


def _fails_somewhere(ex, ns, n=24):
    for i in range(n):
        with np.errstate(all="ignore"):
            res = grade_case(ex, ns, exercises.draw_case(ex, 5, i), None, None, {}, diagnose.TOL, None)
        if res["failure"] is not None or not all(v["ok"] for v in res["results"].values()):
            return True
    return False


@pytest.mark.parametrize("name", NAMES)
def test_each_mistake_is_a_patch_of_the_solution_that_fails(name):
    ex = drills.EXERCISES[name]
    with open(ex.solution_path, encoding="utf-8") as fh:
        solution = fh.read()
    assert not _fails_somewhere(ex, ex.variant())                  # the solution itself passes
    for m in ex.mistakes:
        for patches in m.configs:
            patched = apply_patches(solution, patches)
            assert patched is not None, f"{m.id}: a patch's text is not in {name}/solution.py"
            assert patched != solution, m.id
            assert _fails_somewhere(ex, ex.variant(patches)), f"{m.id} {patches} passes the grading"


def test_a_patched_solution_fails_drill_check(tmp_path):
    """The whole path once: a mistake's own patch written as a user's file, through ``drill check``."""
    ex = drills.EXERCISES["softmax"]
    m = ex.mistakes[0]
    with open(ex.solution_path, encoding="utf-8") as fh:
        path = tmp_path / "softmax.py"
        path.write_text(apply_patches(fh.read(), m.also[0]))
    buf = io.StringIO()
    rc = drills.check_file(str(path), stream=buf, cases=8, torch="off", quiet=True)
    assert rc == 1 and f"known mistake [{m.id}]" in buf.getvalue(), buf.getvalue()


@pytest.mark.parametrize("path", ["numpy_transformer/drills/exercises/__init__.py", "reference_torch/drill_oracle.py",
                                  "numpy_transformer/drills/engine/judge.py",
                                  "numpy_transformer/drills/engine/grader.py"])
def test_no_hand_kept_list_of_exercises(path):
    """The registry and the torch oracle name no exercise (the oracle's irregular adapters aside)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        text = fh.read()
    if "def adapter_" in text:
        text = text[text.index("def _table_op"):]       # the generic part: what runs any exercise
    named = [n for n in NAMES if re.search(rf"[\"']{n}[\"']", text)]
    assert not named, f"{path} names {named}"
