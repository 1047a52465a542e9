"""What a check costs, counted rather than timed (the speed goal, under 2 s per check on 2 cores, lives in
benchmarks/bench_drills.py; a test never reads a clock).

* a failing check talks to its grading child in a fixed number of messages: the setup, every case in
  one batch, the smallest-case search in one batch, the smallest case, the gradient check in one batch
  (it used to be one round trip per perturbed forward and per extra case drawn, within time budgets);
* the search for two known mistakes at once is bounded by a count, on the first case that needs it,
  then only the pairs that matched there (it used to try every pair on every failing case for 8 s);
* the smallest failing case is the same whatever the machine's load (a count, not a clock, bounds it);
* the cases that decide PASS/FAIL are not reduced: every listed mistake is still caught
  (tests/drills/test_drill_grading.py) on the default 40 cases.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import numpy_transformer.drills as drills
from numpy_transformer.drills.engine import grader, matching, probe
from numpy_transformer.drills.engine.definition import Exercise
from numpy_transformer.drills.exercises import draw_case
from tests.drills.drill_helpers import apply_patches, solution_source


def _counting_worker(monkeypatch):
    """Patch the grader's ``start_worker`` so that every message to the child is counted."""
    sent = []
    real = grader.start_worker

    def start(timeout, tmp):
        child = real(timeout, tmp)
        send = child.send

        def counted(msg):
            sent.append(msg.get("op"))
            return send(msg)
        child.send = counted
        return child
    monkeypatch.setattr(grader, "start_worker", start)
    return sent


def _write(tmp_path, name, patches):
    path = tmp_path / f"{name}.py"
    path.write_text(f"# drill: {name}\n" + apply_patches(solution_source(name), patches))
    return path


@pytest.mark.parametrize("name", ["decoder_layer", "encoder_layer", "multi_head_attention"])
def test_a_failing_check_sends_a_fixed_number_of_messages(name, tmp_path, monkeypatch):
    ex = drills.get(name)
    path = _write(tmp_path, name, ex.mistakes[0].patches)
    sent = _counting_worker(monkeypatch)
    rc = drills.check_file(str(path), stream=io.StringIO(), torch="off", quiet=True)
    assert rc == 1
    # setup, the 40 cases, the shrinking candidates (the smallest case's arrays are among the answers
    # already received: no run of its own), the sub-blocks switched off (localisation, docs/drills.md),
    # the gradient check's forwards (one copy of the inputs and the points: the child builds the copies)
    assert sent == ["setup", "batch", "batch", "batch", "perturb"], sent


def test_a_passing_check_sends_two_messages(tmp_path, monkeypatch):
    path = _write(tmp_path, "decoder_layer", ())
    sent = _counting_worker(monkeypatch)
    assert drills.check_file(str(path), stream=io.StringIO(), torch="off", quiet=True) == 0
    assert sent == ["setup", "batch"], sent


def test_the_pair_search_is_bounded_by_a_count(tmp_path, monkeypatch):
    """An unlisted mistake (the output doubled) that no known mistake, alone or paired, explains: the pairs
    are tried on one case (at most MAX_PAIR_RUNS runs), none on the others."""
    path = _write(tmp_path, "multi_head_attention", [("    return out, (x,", "    return 2.0 * out, (x,")])
    assert "return 2.0 * out" in path.read_text()
    runs = []
    real = Exercise.variant

    def variant(self, *patches):
        if len(patches) == 2:
            runs.append(patches)
        return real(self, *patches)
    monkeypatch.setattr(Exercise, "variant", variant)
    rc = drills.check_file(str(path), stream=io.StringIO(), torch="off", quiet=True)
    assert rc == 1
    assert 0 < len(runs) <= matching.MAX_PAIR_RUNS, len(runs)
    n_configs = sum(len(m.configs) for m in drills.get("multi_head_attention").mistakes)
    assert len(runs) <= n_configs * (n_configs - 1) // 2          # one case's worth, not one per failing case


def test_the_gradient_check_is_bounded_per_input_and_in_total():
    ex = drills.get("decoder_layer")
    case = draw_case(ex, 0, 3)
    ref = matching.reference_outputs(ex, case.inputs)
    batches = []

    def run_many(inputs_list):
        batches.append(len(inputs_list))
        return [matching.run_impl(ex, ex.reference(), inp, disabled={"decoder_layer_backward": "forward only"},
                               watch=False).outputs for inp in inputs_list]
    checks = probe.grad_check(ex, None, case.inputs, ref, ref, run_many)
    assert len(batches) == 1                                    # every perturbed forward in one request
    assert sum(c["n"] for c in checks) <= probe.FD_MAX_TOTAL
    assert all(c["n"] <= probe.FD_MAX_ELEMENTS for c in checks)
    assert batches[0] == 1 + 2 * sum(c["n"] for c in checks)    # the inputs, then +h and -h per element
    assert checks and all(c["consistent"] for c in checks), checks   # the reference agrees with itself


def test_the_smallest_failing_case_is_found_by_count_not_by_clock():
    ex = drills.get("softmax")
    failing = [(5, draw_case(ex, 0, 5))]
    graded = []

    def grade_many(cases):
        graded.append(len(cases))
        return [True] * len(cases)
    first = probe.smallest_failing(ex, failing, grade_many, lambda i: draw_case(ex, 0, i), 40)
    again = probe.smallest_failing(ex, failing, grade_many, lambda i: draw_case(ex, 0, i), 40)
    assert first[0] == again[0]
    assert graded == [probe.SHRINK_RUNS] * 2                     # one request each, the smallest drawn cases
    sizes = [probe.input_size(draw_case(ex, 0, i).inputs) for i in range(40, 40 + probe.SHRINK_DRAWS)]
    assert probe.input_size(first[1].inputs) == min(sizes + [probe.input_size(failing[0][1].inputs)])


def test_variant_comparison_shortcut_agrees_with_compare():
    """An output a patch leaves alone is judged right from the unpatched solution's verdict: for every
    variant of every exercise on a few cases, the sets of wrong outputs equal those of a full comparison."""
    from numpy_transformer.drills.engine import diagnose
    for name in drills.EXERCISES:
        ex = drills.get(name)
        for i in (0, ex.n_edge + 1):
            case = draw_case(ex, 0, i)
            with np.errstate(all="ignore"):
                ref = matching.reference_outputs(ex, case.inputs)
                variants = matching.variant_outputs(ex, case.inputs)
                fast = matching.variants_wrong(ex, case.inputs, variants, ref, diagnose.TOL)
            full = {mid: [{n for n, v in vout.items() if n in ref and not diagnose.compare(v, ref[n])["ok"]}
                          for vout in results] for mid, results in variants.items()}
            assert fast == full, name
