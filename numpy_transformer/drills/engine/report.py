"""The report of ``drill check``: per case, per returned array, the diagnosis, the interview clock, the score.

:func:`report` turns the worker's events into text (through ``out``, which wraps at 100 columns) and
returns the exit status; the diagnosis itself is :mod:`.diagnosis`.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from . import diagnosis, localise


def format_duration(seconds):
    seconds = int(max(0, round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m {s:02d}s"
    return f"{m}m {s:02d}s"


def _fmt_index(name, index):
    return f"{name}[{', '.join(str(i) for i in index)}]" if index else name


def _g(x):
    return "nan" if x is None else f"{x:.6g}"




def _tail(text, n=15):
    lines = text.rstrip().splitlines()
    return lines[-n:]


def report(out, path, ex, run, opts):
    """Print the report of one graded run (``run``: the worker's events and how the process ended); return
    the exit status, and fill ``opts.result`` (exercise, passed, mistakes, elapsed)."""
    events, t_start, now, timed_out, timeout, rc, user_output = (
        run.events, run.t_start, run.now, run.timed_out, run.timeout, run.rc, run.user_output)
    seed, cases, verbose, quiet, show_output = opts.seed, opts.cases, opts.verbose, opts.quiet, opts.show_output
    result = opts.result
    result.update(exercise=ex.name, passed=False, mistakes=[],
                  elapsed=None if t_start is None else now - t_start)
    out(f"drill check: {ex.name} ({ex.difficulty})   file: {path}")
    if t_start is not None:
        elapsed = now - t_start
        over = "  (over the target)" if elapsed > ex.minutes * 60 else ""
        out(f"interview clock: {format_duration(elapsed)} since `drill start` (target {ex.minutes} min){over}")
    else:
        out("interview clock: no start time in the file (`drill start` writes one in its header)")

    load = next((e for e in events if e.get("event") == "load"), None)
    internal = next((e for e in events if e.get("event") == "internal_error"), None)
    if load is None and internal is not None:
        out(f"FAIL  internal grader error before grading: {internal['message']} (please report this bug)")
        return 2
    if load is None:
        out("FAIL  the grader process ended before loading your file")
        _process_failure(out, timed_out, timeout, rc, user_output)
        return 2 if not timed_out else 1
    if not load.get("ok"):
        if load.get("kind") == "refused":
            result["refused"] = True
        return _load_failure(out, path, ex, load, user_output)

    case_events = [e for e in events if e.get("event") == "case"]
    done = any(e.get("event") == "done" for e in events)
    oracle_line = _oracle_summary(load, case_events)
    out(f"cases: {len(case_events)} of {cases} graded (seed {seed}; the first {min(ex.n_edge, cases)} are fixed "
        f"edge cases)")
    out(f"reference: {ex.reference_name}")
    out(f"oracle: {oracle_line}")
    if load.get("missing"):
        out(f"note: not defined in your file: {', '.join(load['missing'])}")
    out("")

    # per case
    if not quiet:
        width = max([len(e["desc"]) for e in case_events] + [10])
        width = min(width, 70)
        run = []            # consecutive cases failing with the same error (collapsed after two)

        def flush():
            if len(run) > 2:
                out(f"  cases {run[2] + 1}-{run[-1] + 1}: the same" if len(run) > 3 else
                    f"  case {run[2] + 1}: the same")
            run.clear()

        prev = None
        for e in case_events:
            bad = [n for n, r in e["results"].items() if not r["ok"]]
            status = "PASS" if not bad else "FAIL  " + _case_reason(e, bad)
            if e.get("mutations"):
                status = ("FAIL  " if not bad else status + "; ") + "modified an input in place"
            same_error = bool(bad) and e.get("failure") is not None and all(
                e["results"][n].get("problem") == "not_computed" for n in bad)
            if same_error and status == prev:
                run.append(e["index"])
                if len(run) > 2:
                    continue
            else:
                flush()
                if same_error:
                    run.append(e["index"])
            prev = status if same_error else None
            tags = f"  [{'; '.join(e['tags'])}]" if e.get("tags") and (bad or verbose) else ""
            out(f"  case {e['index'] + 1:>3}  {e['desc']:<{width}}  {status}{tags}")
        flush()
        out("")

    # per returned array
    names = [n for n, _ in ex.outputs]
    total = passed = 0
    out("returned arrays:")
    name_w = max(len(n) for n in names)
    fn_w = max(len(f) for _, f in ex.outputs)
    fails = OrderedDict()
    for name, fname in ex.outputs:
        rs = [(e, e["results"][name]) for e in case_events]
        ok = sum(1 for _, r in rs if r["ok"])
        total += len(rs)
        passed += ok
        verdict = "PASS" if ok == len(rs) and rs else "FAIL"
        out(f"  {name:<{name_w}}  {fname:<{fn_w}}  {ok:>3}/{len(rs):<3} {verdict}")
        result.setdefault("arrays", []).append({"name": name, "function": fname, "passed": ok, "cases": len(rs),
                                                "first_failure": next((e["index"] + 1 for e, r in rs if not r["ok"]),
                                                                      None)})
        bad = [(e, r) for e, r in rs if not r["ok"]]
        if bad:
            fails[name] = bad
            e, r = bad[0]
            out(f"  {'':<{name_w}}  first failure: case {e['index'] + 1}: {e['desc']}")
            out(f"  {'':<{name_w}}  {_failure_detail(name, r)}")
    out("")

    # diagnosis
    result["mistakes"] = _diagnosis(out, ex, fails, case_events, opts.dump)
    by_kind = {e["event"]: e for e in events if e.get("event") in ("smallest", "gradcheck", "localise")}
    for lines in (localise.lines(by_kind.get("localise")), diagnosis.gradcheck_lines(by_kind.get("gradcheck")),
                  diagnosis.smallest_lines(by_kind.get("smallest"), bool(opts.dump))):
        for line in lines:
            out(line)
        if lines:
            out("")

    notes = []
    for e in case_events:
        for n in e.get("notes", []):
            if n not in notes:
                notes.append(n)
    for n in notes[:5]:
        out(f"note: {n}")
    if notes:
        out("")

    cut_short = not done
    if internal is not None:
        where = f" on case {internal['index'] + 1}" if internal.get("index", -1) >= 0 else ""
        out(f"FAIL  internal grader error{where}: {internal['message']} (please report this bug)")
    if cut_short and internal is None:
        started = [e["index"] for e in events if e.get("event") == "start"]
        graded = {e["index"] for e in case_events}
        stuck = next((i for i in started if i not in graded), None)
        where = f" during case {stuck + 1}" if stuck is not None else ""
        _process_failure(out, timed_out, timeout, rc, user_output, where)
    elif show_output and user_output.strip():
        out("output printed by your file (last lines):")
        for line in _tail(user_output, 30):
            out(f"    {line}")
        out("")

    mutated = sum(1 for e in case_events if e.get("mutations"))
    full_cases = sum(1 for e in case_events if all(r["ok"] for r in e["results"].values()) and not e.get("mutations"))
    all_ok = (passed == total and total > 0 and not cut_short and internal is None and len(case_events) == cases
              and not mutated)
    result.update(passed=all_ok, checks_passed=passed, checks=total, cases=cases, cases_graded=len(case_events),
                  cases_fully_correct=full_cases, cases_modified_input=mutated, seed=seed)
    pct = 100.0 * passed / total if total else 0.0
    out(f"score: {passed}/{total} checks passed ({pct:.0f}%), {full_cases}/{cases} cases fully correct"
        + (f", {mutated} case(s) modified an input in place" if mutated else "")
        + (f", time {format_duration(now - t_start)}" if t_start is not None else "")
        + f"   ->  {'PASS' if all_ok else 'FAIL'}")
    if not all_ok and not quiet:
        out(f"stuck? `python -m numpy_transformer drill solution {ex.name}` shows the reference and its derivation.")
    return 0 if all_ok else 1


def _case_reason(e, bad):
    f = e.get("failure")
    if f and all(e["results"][n].get("problem") == "not_computed" for n in bad):
        return _short(f["message"], 80)
    computed = [n for n in bad if e["results"][n].get("problem") != "not_computed"]
    reason = " ".join(computed)
    if f:
        reason += f"; {_short(f['message'], 60)}"
    return reason


def _short(text, n):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _failure_detail(name, r):
    p = r.get("problem")
    if p in ("value", "nonfinite"):
        idx = _fmt_index(name, r.get("index"))
        if p == "nonfinite":
            return f"{r['message']}; worst element {idx}: got {_g(r['got'])}, expected {_g(r['expected'])}"
        return (f"worst element {idx}: got {_g(r['got'])}, expected {_g(r['expected'])} "
                f"(abs err {r['abs']:.2e}, max rel err {r['rel']:.2e})")
    if p == "shape":
        return f"wrong shape: {r['message']}"
    return r.get("message", "wrong")


def _diagnosis(out, ex, fails, case_events, dump):
    """Print the diagnosis; return the ids of the known mistakes it names."""
    mutations = diagnosis.mutation_lines(case_events)
    if not fails and not mutations:
        out("diagnosis: every returned array matches the reference on every case.")
        out("")
        return []
    out("diagnosis:")
    lines = diagnosis.known_mistake_lines(ex, fails, case_events)
    named = [m.id for m in ex.known if any(f"[{m.id}]" in line for line in lines)]
    named += re.findall(r"\[(mutant_\w+)\]", " ".join(lines))[:1]     # a mutant of the solution (engine/mutants.py)
    lines += mutations + diagnosis.error_lines(case_events)
    if fails and not named and any(r.get("problem") != "not_computed" for bad in fails.values() for _, r in bad):
        lines.append(diagnosis.fallback_line(fails))
    shared = diagnosis.shared_options(case_events)
    if shared:
        lines.append(f"  * {shared}")
    for line in lines:
        out(line)
    out("")
    return named


def _oracle_summary(load, case_events):
    if not load.get("oracle_used"):
        return load.get("oracle") or "not used"
    rels = [e["oracle"].get("rel") for e in case_events if e.get("oracle") and "rel" in e["oracle"]]
    errs = [e for e in case_events if e.get("oracle") and "error" in e["oracle"]]
    if not rels and not errs:
        return load.get("oracle")
    worst = max(rels) if rels else 0.0
    disagree = [e for e in case_events if e.get("oracle") and "rel" in e["oracle"]
                and not e["oracle"].get("agree", e["oracle"]["rel"] <= 1e-9)]
    if disagree:
        bad = disagree[0]
        return (f"{load.get('oracle')} DISAGREES with the reference on case {bad['index'] + 1} "
                f"(rel err {bad['oracle']['rel']:.1e}): a bug in our reference, please report it")
    msg = f"{load.get('oracle')} agrees with the reference on {len(rels)}/{len(case_events)} cases " \
          f"(max rel err {worst:.1e}; an output that is exactly 0 on one side and rounding noise on the other agrees)"
    if errs:
        msg += f"; oracle failed on {len(errs)} case(s): {errs[0]['oracle']['error']}"
    return msg


def _process_failure(out, timed_out, timeout, rc, user_output, where=""):
    if timed_out:
        out(f"FAIL  grading stopped{where}: it ran past the time limit of {timeout:g} s (an infinite loop, or "
            "very slow code? --timeout raises the limit)")
    else:
        out(f"FAIL  the grading process exited unexpectedly{where} (exit status {rc}): did your code call "
            "os._exit, or crash the interpreter?")
    tail = _tail(user_output)
    if tail:
        out("last output of the grading process:")
        for line in tail:
            out(f"    {line}")


def _load_failure(out, path, ex, load, user_output):
    kind = load.get("kind")
    if kind == "missing":
        out(f"FAIL  {path} defines none of the {ex.name!r} functions: {', '.join(load['missing'])}")
        if load.get("found"):
            out(f"      functions found in the file: {', '.join(load['found'])}")
        for want, got in load.get("suggest", {}).items():
            out(f"      did you mean {want!r} for your {got!r}? keep the skeleton's names and signatures")
        out("      (wrong exercise? pass --exercise NAME; a fresh skeleton: `drill start NAME`)")
        return 2
    if kind == "refused":
        line = f", line {load['line']}" if load.get("line") else ""
        out(f"FAIL  {path}{line} {load['message']}")
        out("      the file is refused before it runs: grade your own NumPy code -> FAIL")
        return 1
    if kind == "syntax":
        out(f"FAIL  {path}: syntax error, line {load.get('line')}: {load['message']}")
        if load.get("text"):
            out(f"    {load['text']}")
        return 2
    where = ""
    if load.get("where"):
        line, text = load["where"]
        where = f" (your line {line}: `{_short(text, 70)}`)"
    out(f"FAIL  {path}: {load['message']}{where}")
    out("      the file is imported before grading, so module-level code must run without error")
    tail = _tail(user_output, 8)
    if tail:
        out("last output:")
        for line in tail:
            out(f"    {line}")
    return 2
