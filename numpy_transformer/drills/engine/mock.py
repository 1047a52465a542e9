"""``drill mock``: a mock interview. A set of exercises drawn by difficulty to fill the time, skeletons
without hints, the clock, and one grade for all of them at the end.

:func:`plan` draws the set, :func:`start_mock` writes it (with ``mock.json``, the session: start time,
time allowed, exercises), :func:`grade_mock` grades every file and records each attempt in ``drill stats``.
"""

from __future__ import annotations

import io
import json
import os
import random
import time

from ...utils.text import fit
from ..exercises import EXERCISES, get
from . import stats
from .report import format_duration

SESSION = "mock.json"
LEVELS = ("easy", "medium", "hard")          # a warm-up first, then harder ones while time is left


def plan(minutes, seed=None):
    """Exercises whose target times fit in ``minutes``: one per level in turn (easy, medium, hard) while any fits.

    Drawn at random (``seed``) within each level; at least one exercise (the quickest) even when none fits.
    """
    rng = random.Random(seed)
    pools = {lv: [e for e in EXERCISES.values() if e.difficulty == lv] for lv in LEVELS}
    for pool in pools.values():
        rng.shuffle(pool)
    chosen, left = [], minutes
    progress = True
    while progress:
        progress = False
        for lv in LEVELS:
            pool = [e for e in pools[lv] if e not in chosen and e.minutes <= left]
            if pool:
                chosen.append(pool[0])
                left -= pool[0].minutes
                progress = True
    if not chosen:
        chosen = [min(EXERCISES.values(), key=lambda e: e.minutes)]
    return chosen


def start_mock(directory, minutes, seed=None, now=None):
    """Write the hint-free skeletons of a drawn set and the session file; return the session dict."""
    from .. import start
    now = time.time() if now is None else now
    os.makedirs(directory, exist_ok=True)
    if os.path.exists(os.path.join(directory, SESSION)):
        raise FileExistsError(os.path.join(directory, SESSION))
    exercises = plan(minutes, seed)
    files = [start(ex.name, directory, force=False, now=now, hints=False) for ex in exercises]
    session = {"started": now, "minutes": minutes, "exercises": [e.name for e in exercises],
               "files": [os.path.basename(f) for f in files]}
    with open(os.path.join(directory, SESSION), "w", encoding="utf-8") as fh:
        json.dump(session, fh, indent=1)
    return session


def load_session(directory):
    with open(os.path.join(directory, SESSION), encoding="utf-8") as fh:
        return json.load(fh)


def grade_mock(directory, out=print, now=None, record=True, cases=None):
    """Grade every file of the session in ``directory``; print one line each and the total; return 0 when
    all pass, else 1."""
    from .grader import DEFAULT_CASES, check_file
    session = load_session(directory)
    now = time.time() if now is None else now
    used = now - session["started"]
    out(f"mock interview: {len(session['files'])} exercise(s), {format_duration(used)} used of "
        f"{session['minutes']} min" + ("  (over time)" if used > 60 * session["minutes"] else ""))
    passed = 0
    for name, fname in zip(session["exercises"], session["files"]):
        path = os.path.join(directory, fname)
        buf = io.StringIO()
        result = {}
        rc = check_file(path, exercise=name, stream=buf, quiet=True, now=now, result=result,
                        cases=cases or DEFAULT_CASES)
        if result.get("elapsed") is None and result.get("exercise"):
            result["elapsed"] = used                 # a file without its header: the session's clock
        if record:
            stats.record(result, now, mock=True)
        score = next((line for line in buf.getvalue().splitlines() if line.startswith("score:")), "")
        verdict = "PASS" if rc == 0 else "FAIL"
        passed += rc == 0
        ex = get(name)
        mistakes = f"  known mistake: {', '.join(result['mistakes'])}" if result.get("mistakes") else ""
        out(fit(f"  {verdict}  {name:<28} ({ex.difficulty}, {ex.minutes} min)  "
                f"{score[len('score: '):].split('   ->')[0] if score else 'not graded'}{mistakes}"))
    out(f"result: {passed}/{len(session['files'])} passed. Details: "
        f"python -m numpy_transformer drill check {os.path.join(directory, session['files'][0])}")
    return 0 if passed == len(session["files"]) else 1
