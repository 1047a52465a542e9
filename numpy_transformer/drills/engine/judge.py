"""The judge: ``drill check``'s grading, in the checking process, which never imports the user's file.

It draws every case, sends its inputs to the grading child (:mod:`.worker`, through a :class:`Candidate`),
receives the returned arrays, computes the reference (the verified library) itself, and grades: the
comparisons, the known mistakes a wrong array matches, the torch oracle, the smallest failing case and the
gradient check of the candidate's own forward (whose perturbed forwards are more requests to the child).
It records what happened as events, one JSON-like dict each, which :mod:`.report` turns into the report:

``{"event": "load", ...}`` once, then per case ``{"event": "start", "index": i}`` and
``{"event": "case", ...}``, and ``{"event": "done"}``. A case that never finishes (the child died, or
the time ran out) leaves its ``start`` as the last event, which tells the report where the time went.
"""

from __future__ import annotations

import ast
import difflib
import re
import time
from types import SimpleNamespace

import numpy as np

from ...oracle import OracleUnavailable
from ...oracle import load as load_oracle
from ..exercises import draw_case
from . import diagnose, localise, readings
from .definition import MISSING
from .harness import run_impl
from .probe import case_features, dump_case, grad_check, smallest_failing
from .spawn import ChildGone, Deadline


class Candidate:
    """The user's functions, as the grading child runs them: ``run(inputs, skip)`` sends one request and
    returns what came back as a recorder-like namespace (``outputs``, ``failure``, ``notes``,
    ``mutations``, ``seconds``). Raises :class:`.spawn.ChildGone` or :class:`.spawn.Deadline`."""

    def __init__(self, child):
        self.child = child

    def run(self, inputs, skip=None):
        return self._result(self.child.request({"op": "run", "inputs": inputs, "skip": dict(skip or {})}))

    def run_all(self, inputs_list, skip=None):
        """Send every case's inputs at once; yield the results in order, each as it arrives (a function
        that times out is skipped on the later cases, as ``grade_case`` would ask)."""
        self.child.send({"op": "batch", "inputs": list(inputs_list), "skip": dict(skip or {})})
        for _ in inputs_list:
            yield self._result(self.child.receive())

    @staticmethod
    def _result(msg):
        outputs = {}
        for name, v in (msg.get("outputs") or {}).items():
            if isinstance(v, dict) and isinstance(v.get("array"), np.ndarray):
                outputs[name] = v["array"]
            elif isinstance(v, dict) and v.get("missing") is True:
                outputs[name] = MISSING
            else:
                problem = v.get("problem") if isinstance(v, dict) else None
                outputs[name] = diagnose.Unusable(str(problem or "is not an array"))
        failure = msg.get("failure")
        if failure is not None:
            failure = {"function": str(failure.get("function")), "kind": str(failure.get("kind")),
                       "message": str(failure.get("message")), "where": failure.get("where")}
        return SimpleNamespace(outputs=outputs, failure=failure, notes=[str(n) for n in msg.get("notes") or []],
                               mutations=[str(m) for m in msg.get("mutations") or []],
                               seconds=float(msg.get("seconds") or 0.0))


class Events(list):
    """The events of one check, each as JSON would give it back (lists, not tuples or arrays; a copy)."""

    def emit(self, **event):
        self.append(_jsonable(event))


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


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


def _reference_outputs(ex, inputs):
    rec = run_impl(ex, ex.reference(), inputs, watch=False)
    if rec.failure is not None:
        raise RuntimeError(f"internal error: the reference failed on this case: {rec.failure['message']}")
    return rec.outputs


def _variant_outputs(ex, inputs, mistakes=None):
    """``{mistake id: [outputs of each of its patches]}`` for ``mistakes`` (the listed ones by default); a
    variant that fails on a case gives no outputs."""
    out = {}
    for m in ex.mistakes if mistakes is None else mistakes:
        results = []
        for cfg in m.configs:
            rec = run_impl(ex, ex.variant(cfg), inputs, watch=False)
            results.append(rec.outputs)
        out[m.id] = results
    return out


def _same(a, b):
    """``a`` is exactly ``b``, bit for bit."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b)


def _variants_wrong(ex, inputs, variants, ref, tol):
    """``{mistake id: [set of the outputs each of its patches gets wrong]}``, compared once per case.

    A patch leaves most outputs' code alone, so they come out bit for bit as the unpatched solution's:
    such an output is right exactly when the solution's is (compared once), with no comparison of its own.
    """
    base = run_impl(ex, ex.variant(), inputs, watch=False).outputs
    base_ok = {n: diagnose.compare(v, ref[n], tol)["ok"] for n, v in base.items() if n in ref}

    def wrong(n, v):
        if base_ok.get(n) and _same(v, base[n]):
            return False
        r = ref[n]
        if isinstance(v, np.ndarray) and v.dtype == np.float64 and isinstance(r, np.ndarray) and r.dtype == np.float64 \
                and v.shape == r.shape and v.size and np.isfinite(v).all() and np.isfinite(r).all():
            # compare()'s verdict for finite arrays, without the report it also builds
            err, scale = float(np.max(np.abs(v - r))), float(np.max(np.abs(r)))
            return not ((err / scale if scale > 0 else err) <= tol or err <= diagnose.ATOL)
        return not diagnose.compare(v, ref[n], tol)["ok"]

    return {mid: [{n for n, v in vout.items() if n in ref and wrong(n, v)} for vout in results]
            for mid, results in variants.items()}


def _match(mistakes, variants, vwrong, wrong, results, outputs):
    """Record in each wrong output's ``variants`` the ``mistakes`` whose variant reproduces it (``vwrong``:
    what each variant gets wrong, from :func:`_variants_wrong`); whether any did."""
    found = False
    for name in wrong:
        matched = results[name].setdefault("variants", [])
        for m in mistakes:
            for vout, vw in zip(variants[m.id], vwrong[m.id]):
                if name in vw and diagnose.matches(outputs[name], vout[name]):
                    matched.append(m.id)
                    break
        found = found or bool(matched)
    return found


def _exception_hint(ex, message):
    for pattern, hint in ex.exception_hints:
        if re.search(pattern, message or ""):
            return hint
    if "unexpected keyword argument" in (message or "") or "positional argument" in (message or ""):
        return "keep the skeleton's exact signature (names and defaults): the grader calls it as documented"
    return None


#: the pair search's bound: at most this many runs of two mistakes combined, on the first case that needs it
MAX_PAIR_RUNS = 240


def _pairs(ex):
    """Every two configurations of two different known mistakes: ``((id1, id2), config1, config2)``."""
    ms = ex.mistakes                 # the listed ones (the families' pairs would cost too much)
    for i in range(len(ms)):
        for j in range(i + 1, len(ms)):
            for c1 in ms[i].configs:
                for c2 in ms[j].configs:
                    yield (ms[i].id, ms[j].id), c1, c2


def _match_pairs(ex, inputs, results, user_outputs, ref, tol, state):
    """For wrong outputs no single mistake explains, try two known mistakes at once (patches that combine).

    Matches are recorded as ``"id1+id2"`` in the output's ``pairs``. ``state`` (one dict per check) bounds
    the cost: the first case that needs the search tries every pair (at most :data:`MAX_PAIR_RUNS` runs);
    later cases try only the pairs that matched there (``state["candidates"]``), since a pair explains a
    failure only if it reproduces it on (nearly) every failing case.
    """
    todo = [n for n, r in results.items()
            if not r["ok"] and r.get("problem") in ("value", "nonfinite", "shape") and not r.get("variants")]
    if not todo:
        return
    first = state.get("candidates") is None
    tries = list(_pairs(ex))[:MAX_PAIR_RUNS] if first else state["candidates"]
    found = []
    for (id1, id2), c1, c2 in tries:
        both = ex.variant(c1, c2)
        if both is None:                  # the two patch the same line: not both at once
            continue
        vout = run_impl(ex, both, inputs, watch=False).outputs
        hit = False
        for n in todo:
            if n in vout and diagnose.matches(user_outputs[n], vout[n]):
                hit = True
                pair = f"{id1}+{id2}"
                if pair not in results[n].setdefault("pairs", []):
                    results[n]["pairs"].append(pair)
        if hit:
            found.append(((id1, id2), c1, c2))
    if first:
        state["candidates"] = found


def _family_candidates(ex, state):
    """The op families to try on a case: every one on the first case that needs them, then only those
    that reproduced a wrong array there or changed nothing there (``state["candidates"]``, one dict per
    check; None: every one), as the pair search is bounded."""
    keep = None if state is None else state.get("candidates")
    return ex.families if keep is None else tuple(m for m in ex.families if m.id in keep)


def grade_case(ex, module, case, path, time_limit, disabled, tol, oracle, pair_budget=None, user=None, ref=None,
               families=False, family_state=None):
    """Grade one case: the reference (``ref``: already computed, else computed here), the candidate's
    outputs (``user``: already received from the child, else run here), the comparisons, the known mistakes
    and the oracle. Returns the case event's fields. The op families' mistakes are tried when ``families``
    is true or no listed mistake reproduces a wrong array of the case (``families_skipped`` says when
    they were not: :func:`grade_all` comes back to those cases when the listed ones leave arrays
    unexplained elsewhere)."""
    inputs = case.inputs
    ref = ref if ref is not None else _reference_outputs(ex, inputs)
    t0 = time.perf_counter()
    rec = user if user is not None else _run(ex, module, inputs, time_limit, path, disabled)
    seconds = getattr(rec, "seconds", None) if user is not None else time.perf_counter() - t0
    failure = rec.failure
    if failure is not None:
        failure = dict(failure)
        failure["hint"] = _exception_hint(ex, failure["message"])
        if failure["kind"] == "timeout":
            disabled[failure["function"]] = f"skipped: {failure['function']} timed out on an earlier case"
    results = {}
    variants, skipped = None, False
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
    if wrong:
        # the listed mistakes first; the op families' only when no listed one reproduces any wrong array here
        variants = _variant_outputs(ex, inputs, ex.mistakes)
        vwrong = _variants_wrong(ex, inputs, variants, ref, tol)
        if not _match(ex.mistakes, variants, vwrong, wrong, results, rec.outputs) or families:
            tried = _family_candidates(ex, family_state)
            more = _variant_outputs(ex, inputs, tried)
            variants.update(more)
            vwrong.update(_variants_wrong(ex, inputs, more, ref, tol))
            _match(tried, variants, vwrong, wrong, results, rec.outputs)
            if family_state is not None and family_state.get("candidates") is None:
                # kept: the families that reproduce a wrong array here, or that change nothing here
                family_state["candidates"] = {m.id for m in tried if any(m.id in results[n]["variants"]
                                              for n in wrong) or not any(vwrong[m.id])}
        else:
            skipped = bool(ex.families)
    if variants is not None and pair_budget is not None:
        _match_pairs(ex, inputs, results, rec.outputs, ref, tol, pair_budget)
    contradicted = []
    if variants is not None:
        # a mistake is contradicted on this case when every one of its configurations would make wrong an
        # output that the user got right (so the user cannot be making exactly that mistake)
        for m in (m for m in ex.known if m.id in variants):
            def contradicts(vw):
                return any(results[n]["ok"] and n in vw for n, _ in ex.outputs)
            if all(contradicts(vw) for vw in vwrong[m.id]):
                contradicted.append(m.id)
        swapped_reference = readings.memo(lambda changed: _reference_outputs(ex, changed))
        for name in wrong:
            if not set(results[name]["variants"]) - set(contradicted):   # a matched mistake needs no reading
                results[name]["hints"] = readings.read(ex, case, name, rec.outputs[name], ref[name], variants,
                                                       swapped_reference, ref)
    oracle_res = None
    if oracle is not None:
        try:
            tout = oracle.run(ex.name, inputs)
            worst, agree = 0.0, True
            for name, arr in tout.items():
                cmp = diagnose.compare(arr, ref[name], 1e-9)
                agree = agree and cmp["ok"]         # rounding noise around an exact 0 (ATOL) agrees too
                if not (cmp["ok"] and (cmp["rel"] or 0.0) > 1e-9):   # such an output has no relative error
                    worst = max(worst, cmp["rel"] or 0.0)
            oracle_res = {"rel": worst, "agree": agree}
        except Exception as exc:  # noqa: BLE001
            oracle_res = {"error": f"{type(exc).__name__}: {exc}"}
    return {"results": results, "failure": failure, "notes": rec.notes, "seconds": seconds, "families_skipped": skipped,
            "oracle": oracle_res, "contradicted": contradicted, "mutations": rec.mutations}


def _probe_failures(ex, module, path, args, failing, disabled, ev):
    """The smallest failing case (shrunk by search), its arrays, and the gradient check on it."""
    def fails_many(batch):
        answers = module.run_all([c.inputs for c in batch], disabled) if isinstance(module, Candidate) else \
            (_run(ex, module, c.inputs, args.call_timeout, path, disabled) for c in batch)
        verdicts = []
        for c, rec in zip(batch, answers):
            ref = _reference_outputs(ex, c.inputs)
            verdicts.append(bool(rec.mutations) or rec.failure is not None or any(
                n not in rec.outputs or not diagnose.compare(rec.outputs[n], ref[n], args.tol)["ok"]
                for n, _ in ex.outputs))
        return verdicts

    index, case = smallest_failing(ex, failing, fails_many, lambda i: draw_case(ex, args.seed, i), args.cases)
    ref = _reference_outputs(ex, case.inputs)
    rec = _run(ex, module, case.inputs, args.call_timeout, path, disabled)
    wrong = {n: rec.outputs[n] for n, _ in ex.outputs if n in rec.outputs
             and not diagnose.compare(rec.outputs[n], ref[n], args.tol)["ok"]}
    event = {"index": index, "extra": index >= args.cases, "desc": case.desc, "features": case_features(case),
             "inputs": _small_arrays(case.inputs), "expected": _small_arrays({n: ref[n] for n in wrong}),
             "got": _small_arrays(wrong), "wrong": list(wrong),
             "mutations": rec.mutations, "failure": rec.failure and rec.failure["message"]}
    if args.dump:
        event["dump"] = dump_case(args.dump, ex.name, index, case.inputs, ref, rec.outputs)
    ev.emit(event="smallest", **event)
    if rec.failure is None:
        def candidates(inputs_list):
            recs = module.run_all(inputs_list, disabled) if isinstance(module, Candidate) else \
                (_run(ex, module, inp, args.call_timeout, path, disabled) for inp in inputs_list)
            return [None if r.failure is not None else r.outputs for r in recs]
        where = localise.localise(ex, case.inputs, rec.outputs, ref, candidates,
                                  lambda inputs: _reference_outputs(ex, inputs), args.tol)
        if where:
            ev.emit(event="localise", index=index, **where)
    backward_fns = {fn for _, fn in ex.outputs[1:] if fn != ex.outputs[0][1]}

    skip = {fn: "forward only" for fn in backward_fns}

    def run_many(inputs_list):
        if isinstance(module, Candidate):
            return [r.outputs for r in module.run_all(inputs_list, skip)]
        return [_run(ex, module, inp, args.call_timeout, path, skip).outputs for inp in inputs_list]

    fwd = ex.outputs[0][0]
    if rec.failure is None and fwd in rec.outputs:
        checks = grad_check(ex, module, case.inputs, ref, rec.outputs, run_many, args.seed)
        if checks:
            ev.emit(event="gradcheck", index=index, desc=case.desc, forward_ok=fwd not in wrong, checks=checks,
                    wrong=list(wrong))


def _small_arrays(d, limit=36):
    """Arrays of at most ``limit`` elements as lists (for the report); bigger ones as their shape."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            for kk, vv in _small_arrays(v, limit).items():
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


def _families_where_unexplained(ex, module, cases, users, refs, path, args, disabled, ev, family_state):
    """When the listed mistakes leave wrong arrays unexplained, try the op families on the cases where
    they were skipped (a listed mistake matched there), so every case counts for them."""
    graded = [(pos, e) for pos, e in enumerate(ev) if e.get("event") == "case"]
    listed = {m.id for m in ex.mistakes}
    if all(listed & set(r.get("variants") or ()) for _, e in graded for r in e["results"].values()
           if not r["ok"] and r.get("problem") != "not_computed"):
        return
    for pos, e in graded:
        if not e.get("families_skipped"):
            continue
        i = e["index"]
        res = grade_case(ex, module, cases[i], path, args.call_timeout, disabled, args.tol, None,
                         user=users[i], ref=refs[i], families=True, family_state=family_state)
        for name, r in res["results"].items():
            if e["results"].get(name, {}).get("pairs"):
                r["pairs"] = e["results"][name]["pairs"]
        res["oracle"] = e.get("oracle")
        ev[pos] = _jsonable(dict(e, **res))


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
    except Exception:  # noqa: BLE001 - grade_case computes it again and reports the error on its case
        refs = [None] * len(cases)
    load = child.receive()
    with np.errstate(all="ignore"):
        if not load.get("ok"):
            problem = {k: load.get(k) for k in ("kind", "message", "line", "text", "where") if load.get(k) is not None}
            problem.setdefault("kind", "import")
            problem.setdefault("message", "the file cannot be imported")
            ev.emit(event="load", ok=False, **problem)
            return
        defined = {str(f) for f in load.get("callable") or []}
        missing = [f for f in ex.functions if f not in defined]
        if len(missing) == len(ex.functions):
            found = [n for n in _defined_functions(path) if not n.startswith("_")]
            suggest = {f: difflib.get_close_matches(f, found, n=1, cutoff=0.5) for f in missing}
            ev.emit(event="load", ok=False, kind="missing", missing=missing, found=found,
                    suggest={k: v[0] for k, v in suggest.items() if v},
                    message=f"none of the functions of the {ex.name!r} exercise is defined")
            return
        module = Candidate(child)
        oracle, oracle_status = _load_oracle(args.torch)
        ev.emit(event="load", ok=True, missing=missing, oracle=oracle_status, oracle_used=oracle is not None)
        disabled = {}
        pair_budget = {}                        # the pair search's state (:func:`_match_pairs`)
        family_state = {}                       # the families' (:func:`_family_candidates`)
        failing = []
        answers = module.run_all([c.inputs for c in cases], disabled)
        users = []
        for i, case in enumerate(cases):
            ev.emit(event="start", index=i)
            user = next(answers)
            try:
                res = grade_case(ex, module, case, path, args.call_timeout, disabled, args.tol, oracle,
                                 pair_budget, user=user, ref=refs[i], family_state=family_state)
            except (ChildGone, Deadline):
                raise
            except Exception as exc:  # noqa: BLE001 - a grader bug must still be reported, not crash
                ev.emit(event="internal_error", index=i, message=f"{type(exc).__name__}: {exc}")
                return
            if res["mutations"] or any(not r["ok"] for r in res["results"].values()):
                failing.append((i, case))
            ev.emit(event="case", index=i, desc=case.desc, tags=case.tags, edge=i < ex.n_edge,
                    features=case_features(case), **res)
            users.append(user)
        _families_where_unexplained(ex, module, cases, users, refs, path, args, disabled, ev, family_state)
        if failing:
            try:
                _probe_failures(ex, module, path, args, failing, disabled, ev)
            except (ChildGone, Deadline):
                raise
            except Exception as exc:  # noqa: BLE001 - the extra analysis must never hide the grade
                ev.emit(event="internal_error", index=-1, message=f"probe: {type(exc).__name__}: {exc}")
                return
        ev.emit(event="done")
