"""What the three held-out sets of drill mistakes (``unlisted/``, ``fresh/``, ``third/``) share: each
mistake graded once per session, its (status, report) kept where every pytest-xdist worker finds it,
so that a set's rate test reads what its per-mistake tests graded instead of grading all again."""

from __future__ import annotations

import json
import os
import re

from tests.drills.drill_helpers import check_inprocess, flat, solution_source

NAMING_GOAL = 0.94
UNKNOWN = "no known mistake explains this failure"

#: cases per graded file (the grader's default is larger; these are enough to catch every mistake)
CASES = 12


def apply_once(source, patches):
    """Apply each (old, new) to ``source``; every old text must occur exactly once."""
    for old, new in patches:
        assert source.count(old) == 1, f"patch target found {source.count(old)} times: {old!r}"
        source = source.replace(old, new)
    return source


def reports_root(tmp_path_factory, folder):
    """The session's folder ``folder`` for graded reports (under pytest-xdist the workers' base
    directories share a parent, fresh per session)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / folder
    path.mkdir(exist_ok=True)
    return path


def graded(data, name, index, reports):
    """(exit status, report) of mistake ``index`` of the data module ``data`` (exercise ``name``),
    graded once per session."""
    saved = reports / f"{name}-{index}.json"
    if saved.exists():
        rc, out = json.loads(saved.read_text())
        return rc, out
    work = reports / f"{name}-{index}"
    work.mkdir(exist_ok=True)
    path = work / f"{name}.py"
    path.write_text(apply_once(solution_source(name), data.MISTAKES[index]["patch"]))
    rc, out = check_inprocess(path, exercise=name, cases=CASES)
    tmp = saved.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([rc, out]))
    os.replace(tmp, saved)                         # whole or absent: another worker may read it
    return rc, out


def first_bullet(out):
    """The first diagnosis bullet of a report, its line wraps undone ("" when there is none)."""
    if "diagnosis:" not in out:
        return ""
    block = out.split("diagnosis:", 1)[1].split("\n\n", 1)[0]
    bullets = re.split(r"\n  \* ", "\n" + block.strip("\n"))
    bullets = [b for b in bullets if b.strip()]
    return flat(bullets[0]).lstrip("* ") if bullets else ""


def headline(bullet):
    """A bullet without its "why:" and "fix:" explanations, nor the "reproduces ..." count: what it names."""
    return re.split(r" (?:why|fix): | reproduces \d", bullet)[0]


def is_named(bullet, keywords):
    low = headline(bullet).lower()
    return UNKNOWN not in low and any(k.lower() in low for k in keywords)


def rate_table(data_of, mistakes, reports, title, env):
    """``(rate, misses, table)`` of a held-out set: a mistake is named when it is caught and the first
    diagnosis bullet names one of its keywords. ``table`` lists the misses (and is written, with an
    audit of every named bullet, to the file the environment variable ``env`` names, when set); a raw
    crash report quoting the offending line may hold a keyword by accident: counted, shown apart."""
    hits, misses = [], []
    for name, index in mistakes:
        m = data_of(name).MISTAKES[index]
        rc, out = graded(data_of(name), name, index, reports)
        bullet = first_bullet(out)
        row = (name, m["label"], bullet or "(no diagnosis)")
        (hits if rc == 1 and is_named(bullet, m["keywords"]) else misses).append(row)
    rate = len(hits) / len(mistakes)
    crashes = [h for h in hits if " raised " in headline(h[2]) and "mistake" not in headline(h[2])]
    lines = [f"{title}: named {len(hits)}/{len(mistakes)} = {rate:.1%} (goal {NAMING_GOAL:.0%}), of which "
             f"{len(crashes)} only a crash report quoting the line; misses:"]
    lines += [f"  {name:28s} {label}\n      -> {bullet[:160]}" for name, label, bullet in misses]
    table = "\n".join(lines)
    if os.environ.get(env):                          # a file to keep the table in (for the record)
        named = ["", "named (what each first bullet names, to audit the keyword matches):"]
        named += [f"  {name:28s} {label}\n      -> {headline(bullet)[:160]}" for name, label, bullet in hits]
        with open(os.environ[env], "w", encoding="utf-8") as fh:
            fh.write(table + "\n" + "\n".join(named) + "\n")
    return rate, misses, table
