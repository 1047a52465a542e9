"""``drill check FILE``: grade a user's file in a subprocess and print the report.

The parent never imports the user's code. It checks the file compiles (reporting a syntax error with
its line), works out which exercise it is, starts :mod:`._worker` with a wall-clock limit, reads its
events back, and turns them into the report: PASS/FAIL per case and per returned array, the first
failing case, the worst element, the known mistake a wrong array matches, the interview clock, a score.

Exit status: 0 every check passed; 1 something failed (or the run was cut short); 2 the file cannot be
graded at all (missing, not Python, syntax error, none of the functions defined, unknown exercise).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, OrderedDict

from .._text import fit
from . import diagnose
from .exercises import EXERCISES, get

HEADER_EXERCISE = re.compile(r"^#\s*drill:\s*([A-Za-z0-9_\-]+)", re.M)
HEADER_STARTED = re.compile(r"^#\s*started:.*\(unix\s+(\d+(?:\.\d+)?)\)", re.M)

DEFAULT_CASES = 40
DEFAULT_CALL_TIMEOUT = 10.0


def _project_root():
    """The directory holding the ``numpy_transformer`` package (put on the worker's PYTHONPATH)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


class _Out:
    def __init__(self, stream):
        self.stream = stream

    def __call__(self, text=""):
        print(fit(text), file=self.stream)


def guess_exercise(source, path):
    """The exercise named in the file header, else the one whose function names the file defines."""
    m = HEADER_EXERCISE.search(source)
    if m and get(m.group(1)):
        return get(m.group(1))
    try:
        names = {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    except SyntaxError:
        names = set()
    best, best_n = None, 0
    for ex in EXERCISES.values():
        n = len(names & set(ex.functions))
        if n > best_n:
            best, best_n = ex, n
    if best is not None:
        return best
    return get(os.path.splitext(os.path.basename(path))[0])


def started_at(source):
    m = HEADER_STARTED.search(source)
    return float(m.group(1)) if m else None


def _syntax_report(out, path, exc):
    line = exc.lineno or 0
    out(f"FAIL  {path}: syntax error, line {line}: {exc.msg}")
    if exc.text:
        text = exc.text.rstrip("\n")
        out(f"    {text}")
        if exc.offset:
            out("    " + " " * (max(exc.offset, 1) - 1) + "^")
    out("The file must be valid Python before it can be graded; fix the line above and run the check again.")


def check_file(path, exercise=None, seed=0, cases=DEFAULT_CASES, timeout=None, call_timeout=DEFAULT_CALL_TIMEOUT,
               torch="auto", tol=diagnose.TOL, verbose=False, quiet=False, show_output=False, stream=None,
               now=None):
    """Grade ``path``; print the report to ``stream`` (stdout); return the exit status (0, 1 or 2)."""
    out = _Out(stream or sys.stdout)
    try:
        return _check(out, path, exercise, seed, cases, timeout, call_timeout, torch, tol, verbose, quiet,
                      show_output, now)
    except KeyboardInterrupt:
        out("interrupted")
        return 130
    except BrokenPipeError:            # the reader went away (`drill check FILE | head`): not a grader bug
        raise
    except Exception as exc:  # noqa: BLE001 - the grader reports, never crashes
        out(f"FAIL  the grader itself failed ({type(exc).__name__}: {exc}); please report this bug")
        return 2


def _check(out, path, exercise, seed, cases, timeout, call_timeout, torch, tol, verbose, quiet, show_output,
           now):
    if not os.path.exists(path):
        out(f"FAIL  {path}: no such file (create one with `python -m numpy_transformer drill start NAME`)")
        return 2
    if os.path.isdir(path):
        out(f"FAIL  {path} is a directory; give the exercise file, e.g. {os.path.join(path, 'softmax.py')}")
        return 2
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        out(f"FAIL  {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); is it a Python file?")
        return 2
    except OSError as exc:
        out(f"FAIL  cannot read {path}: {exc.strerror or exc}")
        return 2
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        _syntax_report(out, path, exc)
        return 2
    except ValueError as exc:
        out(f"FAIL  {path} cannot be compiled: {exc}")
        return 2

    if exercise is not None:
        ex = get(exercise)
        if ex is None:
            out(f"FAIL  unknown exercise {exercise!r}; see `python -m numpy_transformer drill list`")
            return 2
    else:
        ex = guess_exercise(source, path)
        if ex is None:
            out(f"FAIL  cannot tell which exercise {path} is: it has no `# drill: NAME` header and defines none "
                "of the exercises' functions. Pass --exercise NAME (see `drill list`).")
            return 2

    if cases < 1:
        out("FAIL  --cases must be at least 1")
        return 2
    timeout = timeout if timeout is not None else max(60.0, 20.0 + 2.0 * cases)
    now = time.time() if now is None else now
    t_start = started_at(source)

    with tempfile.TemporaryDirectory(prefix="drill-") as tmp:
        events_path = os.path.join(tmp, "events.jsonl")
        open(events_path, "w").close()
        env = dict(os.environ)
        env["PYTHONPATH"] = _project_root() + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        cmd = [sys.executable, "-m", "numpy_transformer.drills._worker", "--file", os.path.abspath(path),
               "--exercise", ex.name, "--events", events_path, "--seed", str(seed), "--cases", str(cases),
               "--call-timeout", str(call_timeout), "--torch", torch, "--tol", repr(tol)]
        timed_out = False
        t0 = time.time()
        try:
            proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            timed_out = True
            rc, stdout, stderr = None, exc.stdout or b"", exc.stderr or b""
        wall = time.time() - t0
        events = []
        with open(events_path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        break
    user_output = (stdout or b"").decode("utf-8", "replace") + (stderr or b"").decode("utf-8", "replace")
    return _report(out, path, ex, events, seed, cases, t_start, now, timed_out, timeout, rc, user_output, wall,
                   verbose, quiet, show_output)


# --------------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------------


def _tail(text, n=15):
    lines = text.rstrip().splitlines()
    return lines[-n:]


def _report(out, path, ex, events, seed, cases, t_start, now, timed_out, timeout, rc, user_output, wall,
            verbose, quiet, show_output):
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
        bad = [(e, r) for e, r in rs if not r["ok"]]
        if bad:
            fails[name] = bad
            e, r = bad[0]
            out(f"  {'':<{name_w}}  first failure: case {e['index'] + 1}: {e['desc']}")
            out(f"  {'':<{name_w}}  {_failure_detail(name, r)}")
    out("")

    # diagnosis
    _diagnosis(out, ex, fails, case_events)

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

    full_cases = sum(1 for e in case_events if all(r["ok"] for r in e["results"].values()))
    all_ok = passed == total and total > 0 and not cut_short and internal is None and len(case_events) == cases
    pct = 100.0 * passed / total if total else 0.0
    out(f"score: {passed}/{total} checks passed ({pct:.0f}%), {full_cases}/{cases} cases fully correct"
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


def _diagnosis(out, ex, fails, case_events):
    if not fails:
        out("diagnosis: every returned array matches the reference on every case.")
        out("")
        return
    out("diagnosis:")
    # known mistakes: mistake id -> {output: matched count}
    matched = OrderedDict()
    computed_fail = {}
    pairs = OrderedDict()
    for name, bad in fails.items():
        comp = [r for _, r in bad if r.get("problem") != "not_computed"]
        computed_fail[name] = len(comp)
        for r in comp:
            for mid in r.get("variants", []):
                matched.setdefault(mid, Counter())[name] += 1
            for pid in r.get("pairs", []):
                pairs.setdefault(pid, Counter())[name] += 1
    contra = Counter(mid for e in case_events for mid in e.get("contradicted", []))
    order = [m.id for m in ex.mistakes]
    # consistent mistakes first (never contradicted by an output you got right), then by how much they explain
    ranked = sorted(matched.items(), key=lambda kv: (contra[kv[0]] > 0, -sum(kv[1].values()), order.index(kv[0])))
    explained = set()
    shown = 0
    shown_ids = set()
    noise = set()
    for mid, per in ranked:
        if shown == 3 or (shown and contra[mid]):
            break
        if shown and max(c / max(computed_fail[n], 1) for n, c in per.items()) < 0.2 and sum(per.values()) < 3:
            noise.add(mid)                              # a stray coincidence on a degenerate case
            continue
        m = ex.mistake(mid)
        parts = ", ".join(f"{n} {c}/{computed_fail[n]}" for n, c in per.items())
        out(f"  * known mistake [{m.id}]: {m.title}")
        out(f"      matches your wrong arrays on: {parts} failing cases")
        if contra[mid]:
            out(f"      (but on {contra[mid]} case(s) an array you got right would be wrong with this mistake: "
                "a partial match, or two mistakes at once)")
        out(f"      why: {m.explain}")
        out(f"      fix: {m.fix}")
        shown += 1
        shown_ids.add(m.id)
        for n, c in per.items():
            if c == computed_fail[n]:
                explained.add(n)
    rest = [mid for mid, _ in ranked if mid not in shown_ids and mid not in noise and not contra[mid]]
    if rest:
        out(f"  (also consistent with: {'; '.join(ex.mistake(mid).title for mid in rest)})")
    pair_rank = sorted(pairs.items(), key=lambda kv: -sum(kv[1].values()))
    for pid, per in pair_rank[:2]:
        if sum(per.values()) < sum(pair_rank[0][1].values()):
            break                                       # only the best-supported combination(s)
        a, b = (ex.mistake(x) for x in pid.split("+"))
        parts = ", ".join(f"{n} {c}/{computed_fail[n]}" for n, c in per.items())
        out(f"  * two known mistakes at once [{a.id} + {b.id}]: {a.title}  AND  {b.title}")
        out(f"      matches your wrong arrays on: {parts} failing cases (where neither alone does)")
        for m in (a, b):
            if m.id not in shown_ids:
                out(f"      fix ({m.title}): {m.fix}")
        for n, c in per.items():
            if c + matched.get(a.id, Counter())[n] + matched.get(b.id, Counter())[n] >= computed_fail[n]:
                explained.add(n)

    # exceptions and other failures of the functions
    failures = OrderedDict()
    for e in case_events:
        f = e.get("failure")
        if f:
            # group by function and exception type: the message often quotes shapes that vary per case
            key = (f["function"], f["kind"], f["message"].split(":")[0])
            failures.setdefault(key, []).append((e, f))
    shown = 0
    for (fname, kind, _), lst in failures.items():
        msg = lst[0][1]["message"]
        if shown >= 4:
            out(f"  * ... and {len(failures) - shown} other error message(s)")
            break
        e, f = lst[0]
        where = ""
        if f.get("where"):
            line, text = f["where"]
            where = f" (your line {line}: `{_short(text, 70)}`)"
        out(f"  * {msg}{where} -- on {len(lst)} case(s), first case {e['index'] + 1}: {e['desc']}")
        if f.get("hint"):
            out(f"      hint: {f['hint']}")
        shown += 1

    # generic observations for what no known mistake explains
    for name, bad in fails.items():
        if name in explained:
            continue
        comp = [(e, r) for e, r in bad if r.get("problem") != "not_computed"]
        if not comp:
            continue
        counter = Counter()
        first_msg = {}
        for e, r in comp:
            for key, msg in r.get("hints", []):
                counter[key] += 1
                first_msg.setdefault(key, (msg, e))
        if not counter:
            msg = "no known mistake matches" if name not in {n for per in matched.values() for n in per} else \
                "on the other failing cases no known mistake matches"
            out(f"  * {name}: {msg}; compare the worst element above with a hand computation")
            continue
        for key, c in counter.most_common(2):
            if c < 2 and len(comp) > 1:
                continue                  # a one-off observation among many failures is noise
            msg, e = first_msg[key]
            out(f"  * {name}: {msg} (on {c}/{len(comp)} failing cases, first case {e['index'] + 1})")
        tags = Counter(t for e, _ in comp for t in e.get("tags", []))
        for tag, c in tags.items():
            if c == len(comp):
                out(f"      every failing case has: {tag}")
    out("")


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
