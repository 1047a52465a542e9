"""The mutation engine (``engine/mutants.py``, issue 24): single changes of a solution's arithmetic,
generated from its AST, tried when no listed mistake and no family explains a failure.

The hand-written mistakes below are in a candidate's own spelling (not the solution's line), and none
of them is named by a listed mistake, a family or a verified reading: before the mutants the report
said only "no known mistake explains this failure"."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from numpy_transformer import drills
from numpy_transformer.drills.engine import mutants
from numpy_transformer.drills.engine.harness import run_impl
from numpy_transformer.drills.exercises import draw_case
from tests.drills.test_drill_diagnosis import check_patched, named

HAND_WRITTEN = [
    # LayerNorm's scale without its square root, in integers and parentheses of the candidate's own
    ("layer_norm", [("rstd = 1.0 / np.sqrt(var + eps)", "rstd = 1 / (var + eps)")], "layer_norm_forward",
     "the sqrt of `var + eps` left out"),
    # RMSNorm multiplying by the root mean square instead of dividing by it
    ("rms_norm", [("rstd = 1.0 / np.sqrt(ms + eps)", "rstd = np.sqrt(ms + eps)")], "rms_norm_forward",
     "`/` written as `*`"),
    # SiLU's sigmoid derivative with 1/2 for 1
    ("silu", [("return dy * (s + x * s * (1.0 - s))", "return dy * (s + x * s * (0.5 - s))")], "silu_backward",
     "the constant 1.0 halved"),
    # AdamW's second-moment correction without the step's power
    ("adamw_step", [("v_hat = v / (1.0 - beta2 ** t)", "v_hat = v / (1 - beta2)")], "adamw_step",
     "the power `** t` dropped"),
]


@pytest.mark.parametrize("name,patches,function,meaning", HAND_WRITTEN, ids=[h[0] for h in HAND_WRITTEN])
def test_a_mistake_no_family_knows_is_named_by_its_mutant(tmp_path, name, patches, function, meaning):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1
    mid = named(out)
    assert mid is not None and mid.startswith(f"mutant_{function}_"), out
    title = drills.EXERCISES[name].mistake(mid).title
    assert title.startswith(f"in {function}, `") and title.endswith(meaning), title
    assert title in out and "no known mistake explains" not in out


def _same_outputs(ex, cfg_a, cfg_b, n=6):
    """Whether two patches of ``ex``'s solution give the same outputs on ``n`` cases."""
    va, vb = ex.variant(cfg_a), ex.variant(cfg_b)
    for i in range(n):
        inputs = draw_case(ex, 0, i).inputs
        with np.errstate(all="ignore"):
            oa, ob = (run_impl(ex, v, inputs, watch=False).outputs for v in (va, vb))
        if oa.keys() != ob.keys() or any(not np.allclose(oa[k], ob[k], equal_nan=True) for k in oa):
            return False
    return True


@pytest.mark.parametrize("name", ["softmax", "linear", "silu"])
def test_every_mutant_the_engine_offers_is_caught(tmp_path, name):
    """Each mutant, written into a user's file, is failed with a named mistake: itself, a known mistake
    (the listed ones and the families keep precedence), or another mutant that makes the same outputs;
    or a verified reading of its error (which keeps its precedence too): never "no known mistake explains
    this failure". A mutant that changes nothing the cases see (an equivalent mutant) passes and names nothing."""
    ex = drills.EXERCISES[name]
    offered = mutants.of_exercise(ex)
    assert offered
    with open(ex.solution_path, encoding="utf-8") as fh:
        solution = fh.read()
    caught = 0
    for m in offered:
        (old, new), = m.patches
        path = tmp_path / f"{name}.py"
        path.write_text(solution.replace(old, new))
        buf = io.StringIO()
        rc = drills.check_file(str(path), stream=buf, cases=12, torch="off", quiet=True)
        out = " ".join(buf.getvalue().split())
        if rc == 0:
            continue                      # an equivalent mutant (or one the cases never reach)
        found = re.search(r"known mistake (?:in part of your code )?\[(\w+)\]", out)
        mid = found.group(1) if found else None
        if mid is None and "not computed:" in out:
            continue                      # a crash is reported with the user's line, not as a mistake
        caught += 1
        if mid is None:                   # a verified reading of the error keeps its precedence
            assert "no listed mistake, but the error reads (verified on your arrays)" in out, (m.title, out[:600])
            continue
        if mid.startswith("mutant_") and mid != m.id:       # another mutant: the same outputs
            assert _same_outputs(ex, m.patches, ex.mistake(mid).patches), (m.title, mid)
        else:                                # itself, or a listed mistake or a family (they come first)
            assert mid == m.id or mid in {k.id for k in ex.known}, (m.title, mid)
    assert caught >= len(offered) // 2, (caught, len(offered))


def test_mutants_are_patches_of_the_solution_with_generated_titles():
    for ex in drills.EXERCISES.values():
        with open(ex.solution_path, encoding="utf-8") as fh:
            solution = fh.read()
        ids = set()
        for m in mutants.of_exercise(ex):
            assert m.id.startswith("mutant_") and m.id not in ids
            ids.add(m.id)
            (old, new), = m.patches
            assert solution.count(old) == 1 and old != new
            assert m.title.startswith("in ") and " computed as `" in m.title and "#" not in m.title
            assert ex.mistake(m.id) == m


def test_the_first_search_is_bounded_by_a_count():
    """On the first case that needs them at most MAX_MUTANT_RUNS mutants run; afterwards only those that
    reproduced an array there."""
    ex = drills.EXERCISES["encoder_layer"]
    assert len(mutants.of_exercise(ex)) > mutants.MAX_MUTANT_RUNS
    search = mutants.MutantSearch(ex)
    case = draw_case(ex, 0, 6)
    ref = run_impl(ex, ex.reference(), case.inputs, watch=False).outputs
    outputs = {k: (v * 3.0 if isinstance(v, np.ndarray) else v) for k, v in ref.items()}  # no mutant's
    results = {n: {"ok": False, "problem": "value"} for n in outputs}
    calls = []
    real = ex.variant

    class Counting:
        def __getattr__(self, attr):
            return getattr(ex, attr)

        def variant(self, *patches):
            calls.append(patches)
            return real(*patches)

    base = run_impl(ex, ex.variant(), case.inputs, watch=False).outputs
    search.ex = Counting()
    with np.errstate(all="ignore"):
        search.run(case.inputs, results, outputs, ref, 1e-9, base)
        assert 0 < len(calls) <= mutants.MAX_MUTANT_RUNS
        calls.clear()
        search.run(case.inputs, results, outputs, ref, 1e-9, base)
    assert len(calls) == len(search.candidates)
