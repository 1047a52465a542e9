"""What bounds a failing check's diagnosis, counted rather than timed (issue 24's speed goal; the times
live in benchmarks/bench_drills.py):

* the known mistakes (listed and the op families') run on every failing case only until they are
  decided: all of them on the first failing case, then only those still possible (:class:`Shortlist`);
* the verified readings (each a few runs of the reference) are looked for only while one could still
  hold on half of the array's failing cases (:class:`ReadingBudget`);
* a patched solution recompiles only the functions its patch changes (engine/patching.py), and runs as
  the whole file compiled at once does;
* the gradient check sends the inputs once and the child builds the perturbed copies; arrays cross the
  pipe as raw bytes, checked.
"""

from __future__ import annotations

import io
import json
import re
import struct

import numpy as np
import pytest

import numpy_transformer.drills as drills
from numpy_transformer.drills.engine import matching, patching, probe, readings, wire, worker
from numpy_transformer.drills.engine.definition import apply_patches
from numpy_transformer.drills.engine.harness import run_impl
from numpy_transformer.drills.exercises import draw_case
from tests.drills.drill_helpers import solution_source


def _write(tmp_path, name, patches):
    path = tmp_path / f"{name}.py"
    path.write_text(f"# drill: {name}\n" + apply_patches(solution_source(name), patches))
    return path


def _record_tried(monkeypatch):
    """Each call of ``variant_outputs`` (one per failing case): the ids of the mistakes it runs."""
    calls = []
    real = matching.variant_outputs

    def counted(ex, inputs, mistakes=None):
        calls.append([m.id for m in (ex.mistakes if mistakes is None else mistakes)])
        return real(ex, inputs, mistakes)
    monkeypatch.setattr("numpy_transformer.drills.engine.judge.variant_outputs", counted)
    return calls


@pytest.mark.parametrize("name", ["decoder_layer", "multi_head_attention"])
def test_the_known_mistakes_run_on_the_first_failing_case_then_only_those_still_possible(name, tmp_path,
                                                                                         monkeypatch):
    ex = drills.get(name)
    made = ex.mistakes[0]
    path = _write(tmp_path, name, made.patches)
    calls = _record_tried(monkeypatch)
    out = io.StringIO()
    assert drills.check_file(str(path), stream=out, torch="off") == 1
    assert f"[{made.id}]" in out.getvalue()
    assert len(calls) >= 5, calls                             # several failing cases were diagnosed
    assert calls[0] == [m.id for m in ex.known]               # the first: every known mistake, families too
    assert all(set(c) <= set(calls[0]) and made.id in c for c in calls[1:])
    # the others ran while still possible: far fewer runs than every listed mistake on every failing case
    assert sum(len(c) for c in calls[1:]) < len(ex.mistakes) * len(calls[1:]) / 2, calls
    assert max(len(c) for c in calls[1:]) < len(calls[0])


def _shortlist_after(ex, outputs, ref, results, wrong, variants):
    sl = matching.Shortlist(ex)
    tried = sl.todo()
    vwrong = {mid: [{n for n, v in vout.items() if n in ref and not np.allclose(v, ref[n])} for vout in outs]
              for mid, outs in variants.items()}
    sl.update(tried, variants, vwrong, results, wrong, outputs, ref)
    return sl


def test_the_shortlist_keeps_what_reproduces_or_changed_nothing_and_drops_the_rest():
    ex = drills.get("softmax")
    case = draw_case(ex, 0, ex.n_edge + 2)
    with np.errstate(all="ignore"):
        ref = matching.reference_outputs(ex, case.inputs)
        made = ex.mistakes[-1]                                # the candidate makes this one
        outputs = run_impl(ex, ex.variant(made.patches), case.inputs, watch=False).outputs
        variants = matching.variant_outputs(ex, case.inputs, ex.known)
    wrong = [n for n in ref if not np.allclose(outputs[n], ref[n])]
    results = {n: {"variants": []} for n in ref}
    for n in wrong:
        results[n]["variants"] = [m.id for m in ex.known if any(n in v and np.allclose(v[n], outputs[n])
                                                                 for v in variants[m.id])]
    sl = _shortlist_after(ex, outputs, ref, results, wrong, variants)
    kept = {m.id for m in sl.todo()}
    assert made.id in kept
    changed_only = [m.id for m in ex.known if m.id not in kept]
    assert changed_only, "some mistake changed an output without reproducing the wrong ones, and is dropped"
    for mid in changed_only:
        assert any(any(not np.allclose(v[n], ref[n]) for n in v) for v in variants[mid])


def test_readings_are_looked_for_only_while_one_could_still_hold(tmp_path, monkeypatch):
    """An unlisted mistake no reading explains (a spurious residual added to the output): the verified
    readings are looked for on at most half of the failing cases (then the cheap observations only)."""
    path = _write(tmp_path, "multi_head_attention", [("    return out, (x,", "    return out + 0.01 * x, (x,")])
    assert "out + 0.01 * x" in path.read_text()
    read_calls = []
    real = readings.read

    def counted(ex, case, name, *args, **kwargs):
        read_calls.append(name)
        return real(ex, case, name, *args, **kwargs)
    monkeypatch.setattr(readings, "read", counted)
    out = io.StringIO()
    assert drills.check_file(str(path), stream=out, torch="off") == 1
    text = " ".join(out.getvalue().split())
    ok, total = (int(n) for n in re.search(r"returned arrays: out \S+ (\d+)/(\d+)", text).groups())
    failing = total - ok
    assert failing >= 10, text
    assert 0 < read_calls.count("out") <= failing * matching.READING_SHARE + 1, (read_calls.count("out"), failing)
    assert "no known mistake explains this failure" in text


def test_the_reading_budget_counts_what_could_still_hold():
    budget = matching.ReadingBudget({"dx": 10})
    for _ in range(5):
        assert budget.wanted("dx")
        budget.record("dx", [("partial", "...")])             # an observation, not a verified reading
    assert budget.wanted("dx")                                # 5 of 10 could still hold it
    budget.record("dx", None)                                 # a mistake reproduced it: no reading there
    assert not budget.wanted("dx")
    held = matching.ReadingBudget({"dx": 4})
    held.record("dx", [("scaled:2", "off by a constant factor 2")])
    assert held.wanted("dx") and held.without["dx"] == 0


def test_a_patched_solution_runs_as_the_whole_file_compiled_at_once():
    """For every exercise and every known mistake's patch: the chunk-by-chunk compilation gives functions
    that return bit for bit what the whole patched file compiled at once returns."""
    for name in drills.EXERCISES:
        ex = drills.get(name)
        with open(ex.solution_path, encoding="utf-8") as fh:
            solution = fh.read()
        case = draw_case(ex, 0, ex.n_edge + 1)
        for cfg in [()] + [c for m in ex.known for c in m.configs]:
            source = apply_patches(solution, cfg)
            whole, chunked = {}, {}
            exec(compile(source, ex.solution_path, "exec", flags=patching.FLAGS, dont_inherit=True), whole)
            patching.exec_source(source, ex.solution_path, chunked)
            assert sorted(k for k in whole if k != "__builtins__") == sorted(k for k in chunked if k != "__builtins__")
            with np.errstate(all="ignore"):
                a = run_impl(ex, type("A", (), {f: staticmethod(whole[f]) for f in ex.functions}), case.inputs)
                b = run_impl(ex, type("B", (), {f: staticmethod(chunked[f]) for f in ex.functions}), case.inputs)
            assert (a.failure is None) == (b.failure is None), (name, cfg)
            for k, v in a.outputs.items():
                assert np.array_equal(v, b.outputs[k], equal_nan=True), (name, cfg, k)


def test_a_patch_recompiles_only_the_chunk_it_changes():
    ex = drills.get("decoder_layer")
    with open(ex.solution_path, encoding="utf-8") as fh:
        solution = fh.read()
    chunks = patching.split_top_level(solution)
    assert "".join(chunks) == solution and len(chunks) > 5
    patching._compiled.cache_clear()
    patching.exec_source(solution, ex.solution_path, {})
    before = patching._compiled.cache_info()
    patched = apply_patches(solution, ex.mistakes[0].patches)
    patching.exec_source(patched, ex.solution_path, {})
    after = patching._compiled.cache_info()
    changed = sum(1 for c in patching.split_top_level(patched) if c not in chunks)
    assert 1 <= changed < len(chunks)
    assert after.misses - before.misses == changed
    assert after.hits - before.hits == len(chunks) - changed


def test_the_child_builds_the_same_perturbed_inputs_as_the_judge():
    ex = drills.get("decoder_layer")
    inputs = draw_case(ex, 0, 3).inputs
    for path, flat, step in [(("tgt",), 5, 1e-6), (("params", "W1"), 3, -1e-6)]:
        ours = probe._perturbed(inputs, path, flat, step)
        theirs = worker.perturbed(inputs, list(path), flat, step)
        assert np.array_equal(probe._get(ours, path), probe._get(theirs, path))
        assert not np.array_equal(probe._get(ours, path), probe._get(inputs, path))
        assert probe._get(inputs, path).flat[flat] + step == probe._get(theirs, path).flat[flat]


def test_arrays_cross_the_wire_as_they_are():
    msg = {"a": np.arange(6.0).reshape(2, 3).T, "b": [np.array(True), np.float64(2.0), np.zeros((0, 4), np.float32)],
           "c": (np.int16(3), np.array(3.5)), "d": None, "e": "text", "f": np.arange(4, dtype=">i4")}
    back = wire.decode(wire.encode(msg)[8:])
    for key in ("a", "f"):
        assert back[key].dtype == msg[key].dtype and np.array_equal(back[key], msg[key]) and back[key].flags.writeable
    assert back["b"][0].shape == () and back["b"][0].dtype == bool and back["b"][2].shape == (0, 4)
    assert back["c"][0] == 3 and back["c"][1].shape == () and back["d"] is None and back["e"] == "text"


@pytest.mark.parametrize("meta,blob", [(["|O", [1]], b"\0" * 8), (["<f8", [2]], b"\0" * 8),
                                       (["<i4,<f8", [1]], b"\0" * 12), (["<c16", [1]], b"\0" * 16),
                                       (["<f8", [-1]], b""), (["<f8", [True]], b"\0" * 8)])
def test_a_forged_array_is_refused(meta, blob):
    header = json.dumps({"obj": {"__nd__": 0}, "arrays": [meta]}).encode()
    body = struct.pack(">Q", len(header)) + header + struct.pack(">Q", len(blob)) + blob
    with pytest.raises(wire.WireError):
        wire.decode(body)
