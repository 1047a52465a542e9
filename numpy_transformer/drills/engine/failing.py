"""What a failing check adds after the grade, in the judge: the smallest failing case (with its arrays),
where a composite layer goes wrong (:mod:`.localise`), and the gradient check of the candidate's own
forward (:func:`.probe.grad_check`). Each is one batch to the grading child, bounded by counts:

* :func:`start_shrinking` sends the smallest-case search's candidates (:func:`.probe.shrink_candidates`)
  as soon as the failing cases are known, so the child runs them while the judge diagnoses;
* :func:`probe_failures` reads those answers (the reference is computed only until the smallest failing
  one is found), takes the smallest failing case's arrays from the answers already received (no run of
  its own), switches the sub-blocks off on it and checks the gradients there.
"""

from __future__ import annotations

import numpy as np

from ..exercises import draw_case
from . import diagnose, localise
from .matching import reference_outputs
from .probe import case_features, dump_case, grad_check, shrink_candidates

__all__ = ["probe_failures", "small_arrays", "start_shrinking"]


def start_shrinking(ex, module, args, failing, disabled):
    """Send the smallest-case search's candidates to the child (``module``, a :class:`.candidate.Candidate`);
    return what :func:`probe_failures` reads: ``(best known, [(index, case)], their answers)``."""
    best, smaller = shrink_candidates(failing, lambda i: draw_case(ex, args.seed, i), args.cases)
    answers = module.run_all([c.inputs for _, c in smaller], disabled) if smaller else iter(())
    return best, smaller, answers


def _fails(ex, rec, inputs, tol):
    if rec.mutations or rec.failure is not None:
        return True
    ref = reference_outputs(ex, inputs)
    return any(n not in rec.outputs or not diagnose.compare(rec.outputs[n], ref[n], tol)["ok"] for n, _ in ex.outputs)


def probe_failures(ex, module, args, failing, disabled, shrinking, users, ev):
    """The smallest failing case (shrunk by search: ``shrinking`` from :func:`start_shrinking`), its arrays,
    where it goes wrong, and the gradient check on it. ``users``: the candidate's answer on each graded case."""
    (index, case), smaller, answers = shrinking
    rec = users[index]
    recs = list(answers)                             # every answer is read before the next request
    for (i, c), r in zip(smaller, recs):
        if _fails(ex, r, c.inputs, args.tol):
            index, case, rec = i, c, r
            break
    ref = reference_outputs(ex, case.inputs)
    wrong = {n: rec.outputs[n] for n, _ in ex.outputs if n in rec.outputs
             and not diagnose.compare(rec.outputs[n], ref[n], args.tol)["ok"]}
    event = {"index": index, "extra": index >= args.cases, "desc": case.desc, "features": case_features(case),
             "inputs": small_arrays(case.inputs), "expected": small_arrays({n: ref[n] for n in wrong}),
             "got": small_arrays(wrong), "wrong": list(wrong),
             "mutations": rec.mutations, "failure": rec.failure and rec.failure["message"]}
    if args.dump:
        event["dump"] = dump_case(args.dump, ex.name, index, case.inputs, ref, rec.outputs)
    ev.emit(event="smallest", **event)
    if rec.failure is None:
        def candidates(inputs_list):
            return [None if r.failure is not None else r.outputs for r in module.run_all(inputs_list, disabled)]
        where = localise.localise(ex, case.inputs, rec.outputs, ref, candidates,
                                  lambda inputs: reference_outputs(ex, inputs), args.tol)
        if where:
            ev.emit(event="localise", index=index, **where)
    backward_fns = {fn for _, fn in ex.outputs[1:] if fn != ex.outputs[0][1]}
    skip = {fn: "forward only" for fn in backward_fns}

    def run_many(inputs_list):
        return [r.outputs for r in module.run_all(inputs_list, skip)]

    def run_points(inputs, points):
        return [r.outputs for r in module.run_perturbed(inputs, points, skip)]

    fwd = ex.outputs[0][0]
    if rec.failure is None and fwd in rec.outputs:
        checks = grad_check(ex, module, case.inputs, ref, rec.outputs, run_many, args.seed, run_points=run_points)
        if checks:
            ev.emit(event="gradcheck", index=index, desc=case.desc, forward_ok=fwd not in wrong, checks=checks,
                    wrong=list(wrong))


def small_arrays(d, limit=36):
    """Arrays of at most ``limit`` elements as lists (for the report); bigger ones as their shape."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            for kk, vv in small_arrays(v, limit).items():
                out[f"{k}[{kk}]"] = vv
            continue
        try:
            a = np.asarray(v)
        except Exception:  # noqa: BLE001
            continue
        if a.dtype.kind not in "biuf":            # a string option, or whatever a wrong function returned
            out[k] = {"shape": [], "dtype": "text", "values": repr(v)[:80]}
            continue
        out[k] = {"shape": list(a.shape), "dtype": str(a.dtype),
                  "values": a.tolist() if a.size <= limit else None}
    return out
