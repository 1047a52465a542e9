"""The judge: ``drill check``'s grading, in the checking process, which never imports the user's file.

It draws every case, sends its inputs to the grading child (:mod:`.worker`, through a
:class:`.candidate.Candidate`), receives the returned arrays, computes the reference (the verified
library) itself, and grades in two passes: first every case's comparisons (as the answers arrive), then
the diagnosis of the failing ones (the known mistakes a wrong array matches, :mod:`.matching`; the
readings of an error, :mod:`.readings`) while the child already runs the smallest-case search; last the
torch oracle, the smallest failing case, the localisation and the gradient check (:mod:`.probe`). It
records what happened as events, one JSON-like dict each, which :mod:`.report` turns into the report:

``{"event": "load", ...}`` once, then per case ``{"event": "start", "index": i}`` and
``{"event": "case", ...}``, and ``{"event": "done"}``. A case that never finishes (the child died, or
the time ran out) leaves its ``start`` without a ``case``, which tells the report where the time went.
"""

from __future__ import annotations

import ast
import difflib
import re
import time

import numpy as np

from ...oracle import OracleUnavailable
from ...oracle import load as load_oracle
from ..exercises import draw_case
from . import diagnose, readings
from .candidate import Candidate, Events
from .definition import MISSING
from .diagnosis import VERIFIED
from .failing import probe_failures, small_arrays, start_shrinking
from .harness import run_impl
from .matching import MAX_PAIR_RUNS, ReadingBudget, Shortlist, match, match_pairs, variant_outputs, variants_wrong
from .matching import reference_outputs as _reference_outputs
from .mutants import MutantSearch
from .probe import case_features
from .spawn import ChildGone, Deadline

__all__ = ["Candidate", "Events", "MAX_PAIR_RUNS", "grade_all", "grade_case"]

#: the names the tests read (tests/drills/test_drill_wording.py, test_drill_cases.py)
_small_arrays = small_arrays


def _defined_functions(path):
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except Exception:  # noqa: BLE001
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _load_oracle(mode):
    if mode == "off":
        return None, "not used (the verified NumPy reference is the oracle; --torch re-checks it with PyTorch)"
    try:
        oracle = load_oracle("drill_oracle")
        version = oracle.torch_version()
    except OracleUnavailable as exc:
        if exc.torch_missing:
            return None, "not used (torch is not installed): graded against the NumPy reference only"
        return None, f"not used (cannot import the torch oracle: {exc.__cause__})"
    except Exception as exc:  # noqa: BLE001
        return None, f"not used: {type(exc).__name__}: {exc}"
    return oracle, f"torch {version}"


def _run(ex, ns, inputs, time_limit=None, user_path=None, disabled=None):
    """Run ``ns`` (the :class:`Candidate`, or a namespace of functions run here) on ``inputs``."""
    if isinstance(ns, Candidate):
        return ns.run(inputs, disabled)
    return run_impl(ex, ns, inputs, time_limit, user_path, disabled)


def _exception_hint(ex, message):
    for pattern, hint in ex.exception_hints:
        if re.search(pattern, message or ""):
            return hint
    if "unexpected keyword argument" in (message or "") or "positional argument" in (message or ""):
        return "keep the skeleton's exact signature (names and defaults): the grader calls it as documented"
    return None


def compare_case(ex, rec, ref, tol, disabled):
    """The first pass over a case: ``(results, failure, wrong)``: each output compared with the reference
    (``results``), the failure of the candidate's run with its hint, and the wrong arrays that were computed
    (those a known mistake could reproduce). A timeout disables that function for the later cases."""
    failure = rec.failure
    if failure is not None:
        failure = dict(failure)
        failure["hint"] = _exception_hint(ex, failure["message"])
        if failure["kind"] == "timeout":
            disabled[failure["function"]] = f"skipped: {failure['function']} timed out on an earlier case"
    results = {}
    for name, fname in ex.outputs:
        if name not in rec.outputs:
            why = failure["message"] if failure else f"{fname} did not return it"
            results[name] = {"ok": False, "problem": "not_computed", "message": f"not computed: {why}"}
            continue
        got = rec.outputs[name]
        if got is MISSING:
            results[name] = {"ok": False, "problem": "type",
                             "message": f"missing: the grads dict has no key {name[6:-1]!r}"}
            continue
        results[name] = diagnose.compare(got, ref[name], tol)
    wrong = [n for n, r in results.items() if not r["ok"] and r.get("problem") != "not_computed" and n in rec.outputs
             and rec.outputs[n] is not MISSING]
    return results, failure, wrong


def _verified(hints):
    """Whether ``hints`` hold a verified reading of the error (:data:`.diagnosis.VERIFIED`)."""
    return any(key.startswith(VERIFIED) for key, _ in hints or ())


def diagnose_case(ex, case, outputs, ref, results, wrong, tol, shortlist=None, pair_state=None, budget=None,
                  mutants=None):
    """The second pass over a failing case: the known mistakes that reproduce its ``wrong`` arrays (recorded
    in ``results``), the pairs, the readings of the arrays none explains, and last, when some wrong array
    has neither a mistake nor a verified reading, the mutants of the solution (``mutants``: the check's
    :class:`.mutants.MutantSearch`; none: no mutant is tried). ``shortlist``
    (:class:`.matching.Shortlist`), ``pair_state`` and ``budget`` (:class:`.matching.ReadingBudget`) are
    the check's bounds; without them every known mistake is run and every reading looked for. Returns the
    mistakes this case contradicts (each of their patches breaks an array the candidate got right)."""
    if not wrong:
        return []
    tried = shortlist.todo() if shortlist is not None else ex.known
    base = run_impl(ex, ex.variant(), case.inputs, watch=False).outputs
    variants = variant_outputs(ex, case.inputs, tried)
    vwrong = variants_wrong(ex, case.inputs, variants, ref, tol, base)
    match(tried, variants, vwrong, wrong, results, outputs)
    if pair_state is not None:
        match_pairs(ex, case.inputs, results, outputs, ref, tol, pair_state)
    # a mistake is contradicted on this case when every one of its configurations would make wrong an
    # output that the user got right (so the user cannot be making exactly that mistake)
    contradicted = [m.id for m in tried if all(any(results[n]["ok"] and n in vw for n, _ in ex.outputs)
                                               for vw in vwrong[m.id])]
    swapped_reference = readings.memo(lambda changed: _reference_outputs(ex, changed))
    for name in wrong:
        if not set(results[name]["variants"]) - set(contradicted):   # a matched mistake needs no reading
            if budget is None or budget.wanted(name):
                results[name]["hints"] = readings.read(ex, case, name, outputs[name], ref[name], variants,
                                                       swapped_reference, ref)
            else:                         # no reading could hold on enough cases: the cheap observations
                results[name]["hints"] = diagnose.hints(outputs[name], ref[name], case.factors)
        if budget is not None:
            budget.record(name, results[name].get("hints"))
    if mutants is not None and (mutants.candidates or any(
            not results[n].get("variants") and not results[n].get("pairs") and not _verified(results[n].get("hints"))
            for n in wrong)):
        # last, where the report would say "no known mistake explains" (and, once some mutant reproduced
        # an array there, on every later failing case, so that it is judged on all of them)
        contradicted += mutants.run(case.inputs, results, outputs, ref, tol, base)
    if shortlist is not None:
        shortlist.update(tried, variants, vwrong, results, wrong, outputs, ref)
    return contradicted


def _oracle_result(ex, oracle, inputs, ref):
    if oracle is None:
        return None
    try:
        tout = oracle.run(ex.name, inputs)
        worst, agree = 0.0, True
        for name, arr in tout.items():
            cmp = diagnose.compare(arr, ref[name], 1e-9)
            agree = agree and cmp["ok"]         # rounding noise around an exact 0 (ATOL) agrees too
            if not (cmp["ok"] and (cmp["rel"] or 0.0) > 1e-9):   # such an output has no relative error
                worst = max(worst, cmp["rel"] or 0.0)
        return {"rel": worst, "agree": agree}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}


def grade_case(ex, module, case, path, time_limit, disabled, tol, oracle, pair_state=None, user=None, ref=None,
               shortlist=None, budget=None):
    """Grade one case, both passes: the reference (``ref``: already computed, else computed here), the
    candidate's outputs (``user``: already received from the child, else run here), the comparisons, the
    known mistakes, the readings and the oracle. Returns the case event's fields."""
    ref = ref if ref is not None else _reference_outputs(ex, case.inputs)
    t0 = time.perf_counter()
    rec = user if user is not None else _run(ex, module, case.inputs, time_limit, path, disabled)
    seconds = getattr(rec, "seconds", None) if user is not None else time.perf_counter() - t0
    results, failure, wrong = compare_case(ex, rec, ref, tol, disabled)
    contradicted = diagnose_case(ex, case, rec.outputs, ref, results, wrong, tol, shortlist, pair_state, budget)
    return {"results": results, "failure": failure, "notes": rec.notes, "seconds": seconds,
            "oracle": _oracle_result(ex, oracle, case.inputs, ref), "contradicted": contradicted,
            "mutations": rec.mutations}


def _load_failed(ex, path, load, ev):
    """Emit the ``load`` event of a file that cannot be graded; whether it was one."""
    if not load.get("ok"):
        problem = {k: load.get(k) for k in ("kind", "message", "line", "text", "where") if load.get(k) is not None}
        problem.setdefault("kind", "import")
        problem.setdefault("message", "the file cannot be imported")
        ev.emit(event="load", ok=False, **problem)
        return True
    defined = {str(f) for f in load.get("callable") or []}
    missing = [f for f in ex.functions if f not in defined]
    if len(missing) == len(ex.functions):
        found = [n for n in _defined_functions(path) if not n.startswith("_")]
        suggest = {f: difflib.get_close_matches(f, found, n=1, cutoff=0.5) for f in missing}
        ev.emit(event="load", ok=False, kind="missing", missing=missing, found=found,
                suggest={k: v[0] for k, v in suggest.items() if v},
                message=f"none of the functions of the {ex.name!r} exercise is defined")
        return True
    return False


def grade_all(ex, path, args, child, ev):
    """Grade the user's file ``path`` (exercise ``ex``) through the grading ``child``; record into ``ev``.

    ``args``: ``seed``, ``cases``, ``call_timeout``, ``torch`` ("auto" or "off"), ``dump``, ``tol``.
    Returns when the grading is done, or raises :class:`.spawn.ChildGone` / :class:`.spawn.Deadline` when
    the child ended or the time ran out (the events so far say where).
    """
    # while the child starts (a fresh interpreter importing NumPy): the cases and their references
    cases = [draw_case(ex, args.seed, i) for i in range(args.cases)]
    try:
        with np.errstate(all="ignore"):
            refs = [_reference_outputs(ex, c.inputs) for c in cases]
    except Exception:  # noqa: BLE001 - the case's grading computes it again and reports the error there
        refs = [None] * len(cases)
    load = child.receive()
    with np.errstate(all="ignore"):
        if _load_failed(ex, path, load, ev):
            return
        module = Candidate(child)
        oracle, oracle_status = _load_oracle(args.torch)
        missing = [f for f in ex.functions if f not in {str(f) for f in load.get("callable") or []}]
        ev.emit(event="load", ok=True, missing=missing, oracle=oracle_status, oracle_used=oracle is not None)
        disabled = {}
        graded, failing, shrinking = [], [], None
        try:
            # the first pass, as the answers arrive: every case's comparisons
            answers = module.run_all([c.inputs for c in cases], disabled)
            for i, case in enumerate(cases):
                ev.emit(event="start", index=i)
                user = next(answers)
                if refs[i] is None:
                    refs[i] = _reference_outputs(ex, case.inputs)
                graded.append((case, user, compare_case(ex, user, refs[i], args.tol, disabled)))
                if user.mutations or any(not r["ok"] for r in graded[-1][2][0].values()):
                    failing.append((i, case))
            if failing:           # the child runs the smallest-case search while the failures are diagnosed
                shrinking = start_shrinking(ex, module, args, failing, disabled)
        except (ChildGone, Deadline):
            _diagnose_all(ex, graded, refs, args, oracle, ev)     # the cases graded so far are reported
            raise
        except Exception as exc:  # noqa: BLE001 - a grader bug must still be reported, not crash
            ev.emit(event="internal_error", index=len(graded), message=f"{type(exc).__name__}: {exc}")
            return
        if not _diagnose_all(ex, graded, refs, args, oracle, ev):
            return
        if failing:
            try:
                probe_failures(ex, module, args, failing, disabled, shrinking, [u for _, u, _ in graded], ev)
            except (ChildGone, Deadline):
                raise
            except Exception as exc:  # noqa: BLE001 - the extra analysis must never hide the grade
                ev.emit(event="internal_error", index=-1, message=f"probe: {type(exc).__name__}: {exc}")
                return
        ev.emit(event="done")


def _diagnose_all(ex, graded, refs, args, oracle, ev):
    """The second pass: diagnose each graded case (``(case, user, compare_case's answer)``) under the
    check's bounds and emit its ``case`` event; False after a grader bug (reported as an event)."""
    totals = {}
    for _, _, (_, _, wrong) in graded:
        for name in wrong:
            totals[name] = totals.get(name, 0) + 1
    shortlist, pair_state, budget, mutants = Shortlist(ex), {}, ReadingBudget(totals), MutantSearch(ex)
    for i, (case, user, (results, failure, wrong)) in enumerate(graded):
        try:
            contradicted = diagnose_case(ex, case, user.outputs, refs[i], results, wrong, args.tol, shortlist,
                                         pair_state, budget, mutants)
            res = {"results": results, "failure": failure, "notes": user.notes, "seconds": user.seconds,
                   "oracle": _oracle_result(ex, oracle, case.inputs, refs[i]), "contradicted": contradicted,
                   "mutations": user.mutations}
        except (ChildGone, Deadline):
            raise
        except Exception as exc:  # noqa: BLE001 - a grader bug must still be reported, not crash
            ev.emit(event="internal_error", index=i, message=f"{type(exc).__name__}: {exc}")
            return False
        ev.emit(event="case", index=i, desc=case.desc, tags=case.tags, edge=i < ex.n_edge,
                features=case_features(case), **res)
    return True

