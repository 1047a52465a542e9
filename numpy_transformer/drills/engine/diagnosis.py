"""The report's diagnosis: which known mistake explains the failure, what the failing cases share, the
gradient check of the candidate's own code, and the smallest failing case.

A known mistake is named only when it explains most of the failure: its variant reproduces at least
:data:`EXPLAINS` of the wrong arrays (over every failing case) and no array the candidate got right would
be wrong with it. Candidates (single mistakes, and two at once) are ranked by how much they explain;
when none qualifies the report says so in one line rather than naming something wrong.
"""

from __future__ import annotations

from collections import Counter, OrderedDict

import numpy as np

#: a known mistake is named when its variant reproduces at least this share (half) of the wrong arrays
EXPLAINS = 0.5


def _short(text, n):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _items(fails):
    """``{(case index, output): result}`` of the wrong arrays that were computed (not "not computed")."""
    return OrderedDict(((e["index"], name), r) for name, bad in fails.items() for e, r in bad
                       if r.get("problem") != "not_computed")


def rank(ex, fails, case_events):
    """Candidate explanations, best first: ``[(ids, explained items, share, contradicted cases)]``.

    ``ids`` is ``(mistake id,)`` or ``(id1, id2)`` (two mistakes at once).
    """
    items = _items(fails)
    if not items:
        return []
    contra = Counter(mid for e in case_events for mid in e.get("contradicted", []))
    single, pair = {}, {}
    for key, r in items.items():
        for mid in r.get("variants", []):
            single.setdefault(mid, set()).add(key)
        for pid in r.get("pairs", []):
            pair.setdefault(tuple(pid.split("+")), set()).add(key)
    cands = [((mid,), keys) for mid, keys in single.items()]
    for (a, b), keys in pair.items():
        cands.append(((a, b), keys | single.get(a, set()) | single.get(b, set())))
    order = {m.id: i for i, m in enumerate(ex.known)}
    out = [(ids, keys, len(keys) / len(items), max(contra[i] for i in ids)) for ids, keys in cands]
    out.sort(key=lambda c: (c[3] > 0, -len(c[1]), len(c[0]), [order.get(i, 99) for i in c[0]]))
    return out


def explanation(ex, fails, case_events):
    """The best-ranked candidate that explains most of the failure, and the equally good ones; or None."""
    ranked = [c for c in rank(ex, fails, case_events) if c[3] == 0 and c[2] >= EXPLAINS]
    if not ranked:
        return None, []
    best = ranked[0]
    listed = {m.id for m in ex.mistakes}
    same = [c for c in ranked[1:] if len(c[0]) == 1 and c[1] == best[1]
            and not (c[0][0] not in listed and set(best[0]) <= listed)]   # a family's twin of a listed one
    return best, same


def _phrase_list(phrases):
    return " and ".join(phrases)


def shared_options(case_events):
    """One sentence on what the failing cases share that no passing case has (or the reverse), or None."""
    failing = [e for e in case_events if not _case_ok(e)]
    passing = [e for e in case_events if _case_ok(e)]
    if len(failing) < 2:
        return None
    if not passing:
        return None                     # every case fails: nothing to single out (the score says so)
    feats = {e["index"]: set(e.get("features") or []) for e in case_events}
    all_f = set.intersection(*(feats[e["index"]] for e in failing))
    any_p = set.union(*(feats[e["index"]] for e in passing))
    only = sorted(all_f - any_p)
    if only:
        return (f"fails only {_phrase_list(only[:2])}: every one of the {len(failing)} failing cases is, "
                f"none of the {len(passing)} passing ones")
    all_p = set.intersection(*(feats[e["index"]] for e in passing))
    any_f = set.union(*(feats[e["index"]] for e in failing))
    passes = sorted(all_p - any_f)
    if passes and len(passing) >= 2:
        return (f"passes only {_phrase_list(passes[:2])}: all {len(passing)} passing cases are, none of the "
                f"{len(failing)} failing ones")
    return None


def _case_ok(e):
    return not e.get("mutations") and all(r["ok"] for r in e["results"].values())


def partial_lines(ex, fails, case_events):
    """When no mistake explains the failure as a whole: a single known mistake that reproduces most of
    the wrong arrays but would also break arrays the candidate got right, named as made in part of the
    code (the wrong arrays only); empty when there is none."""
    ranked = [c for c in rank(ex, fails, case_events) if len(c[0]) == 1 and c[2] >= EXPLAINS]
    if not ranked:
        return []
    ids, keys, share, _ = ranked[0]
    m = ex.mistake(ids[0])
    where = sorted({name for _, name in keys}, key=[n for n, _ in ex.outputs].index)
    total = Counter(name for _, name in _items(fails))
    return [f"  * known mistake in part of your code [{m.id}]: {m.title}, in {', '.join(where)} only",
            f"      reproduces {len(keys)}/{sum(total.values())} of your wrong arrays; made everywhere it would "
            "also break arrays you got right, so only the code computing these makes it",
            f"      why: {m.explain}",
            f"      fix: {m.fix}"]


def known_mistake_lines(ex, fails, case_events):
    """The lines naming the explaining mistake(s) (empty when none explains most of the failure; then
    :func:`partial_lines` may name one made in part of the code)."""
    best, same = explanation(ex, fails, case_events)
    if best is None:
        return partial_lines(ex, fails, case_events)
    ids, keys, share, _ = best
    n_items = len(_items(fails))
    per = Counter(name for _, name in keys)
    total = Counter(name for _, name in _items(fails))
    parts = ", ".join(f"{n} {per[n]}/{total[n]}" for n in total if per[n])
    lines = []
    if len(ids) == 2:
        a, b = (ex.mistake(i) for i in ids)
        lines.append(f"  * two known mistakes at once [{a.id} + {b.id}]: {a.title}  AND  {b.title}")
        lines.append(f"      together they reproduce {len(keys)}/{n_items} wrong arrays ({parts} failing cases)")
    for mid in ids:
        m = ex.mistake(mid)
        lines.append(f"  * known mistake [{m.id}]: {m.title}")
        if len(ids) == 1:
            lines.append(f"      reproduces {len(keys)}/{n_items} of your wrong arrays ({parts} failing cases)")
        lines.append(f"      why: {m.explain}")
        lines.append(f"      fix: {m.fix}")
    if same:
        lines.append(f"  (equally consistent with: {'; '.join(ex.mistake(c[0][0]).title for c in same)})")
    if share < 1.0:
        lines.append(f"  ({n_items - len(keys)} wrong array(s) it does not explain: a second mistake?)")
    return lines


#: readings verified on the numbers (:mod:`.readings`, and the exact reshapes of :func:`.diagnose.hints`):
#: when one holds on most failing cases it is the diagnosis's headline, not a footnote
VERIFIED = ("scaled:", "swapped:", "option:", "upstream:", "forgot:", "axis:", "term:", "transposed", "sum-leading",
            "reshape", "point:", "reversed:", "layout:", "dtype:", "float32")


def fallback_line(fails):
    """One line when no known mistake explains the failure: the strongest generic observations only. A
    verified reading (:data:`VERIFIED`) that holds on most failing cases heads the line; weaker
    observations follow "no known mistake explains this failure"."""
    strong, verified = [], False
    for name, bad in fails.items():
        comp = [(e, r) for e, r in bad if r.get("problem") != "not_computed"]
        counter, first = Counter(), {}
        for e, r in comp:
            for key, msg in r.get("hints", []):
                counter[key] += 1
                first.setdefault(key, msg)
        for key, c in counter.most_common(1):
            if key != "partial" and (c >= 0.75 * len(comp)) and (c >= 2 or len(comp) == 1):
                strong.append(f"{name}: {first[key]} (on {c}/{len(comp)} failing cases)")
                verified = verified or key.startswith(VERIFIED)
    if strong and verified:
        return "  * no listed mistake, but the error reads (verified on your arrays): " + "; ".join(strong[:2])
    line = "  * no known mistake explains this failure"
    if strong:
        line += "; what the error reads: " + "; ".join(strong[:2])
    return line


def error_lines(case_events):
    """Exceptions and other failures of the functions, grouped (at most four)."""
    failures = OrderedDict()
    for e in case_events:
        f = e.get("failure")
        if f:
            # group by function and exception type: the message often quotes shapes that vary per case
            key = (f["function"], f["kind"], f["message"].split(":")[0])
            failures.setdefault(key, []).append((e, f))
    lines = []
    for shown, lst in enumerate(failures.values()):
        if shown >= 4:
            lines.append(f"  * ... and {len(failures) - shown} other error message(s)")
            break
        e, f = lst[0]
        where = ""
        if f.get("where"):
            line, text = f["where"]
            where = f" (your line {line}: `{_short(text, 70)}`)"
        lines.append(f"  * {f['message']}{where} -- on {len(lst)} case(s), first case {e['index'] + 1}: {e['desc']}")
        if f.get("hint"):
            lines.append(f"      hint: {f['hint']}")
    return lines


def mutation_lines(case_events):
    seen = OrderedDict()
    for e in case_events:
        for m in e.get("mutations", []):
            seen.setdefault(m, []).append(e["index"])
    return [f"  * FAIL: {m} -- on {len(idx)} case(s), first case {idx[0] + 1}" for m, idx in seen.items()]


def gradcheck_lines(ev):
    """The gradient check of the candidate's own code, and what it means."""
    if ev is None:
        return []
    checks = ev["checks"]
    w = max(len(c["name"]) for c in checks)
    lines = [f"gradient check of your own code (case {ev['index'] + 1}: {ev['desc']}): each gradient your "
             "backward returned vs central differences of YOUR forward (float64)"]
    for c in checks:
        verdict = "consistent with your forward" if c["consistent"] else "DOES NOT match your forward"
        lines.append(f"  {c['name']:<{w}}  d/d{c['input']}:  {verdict} (rel err {c['rel']:.1e}, "
                     f"{c['n']} element{'s' if c['n'] != 1 else ''})")
    bad = [c["name"] for c in checks if not c["consistent"]]
    wrong = set(ev.get("wrong", []))
    if ev["forward_ok"] and bad:
        lines.append(f"  -> your forward is right; your backward does not match it ({', '.join(bad)}): the bug is "
                     "in the backward")
    elif not ev["forward_ok"] and not bad:
        lines.append("  -> your forward is wrong; your backward is consistent with it: fix the forward (the "
                     "backward will likely follow)")
    elif not ev["forward_ok"] and bad:
        lines.append(f"  -> your forward is wrong, and your backward does not match it either ({', '.join(bad)})")
    elif wrong:
        lines.append("  -> your backward matches your forward here; the wrong arrays come from elsewhere "
                     f"({', '.join(sorted(wrong))})")
    return lines


def _fmt_array(spec):
    if spec["dtype"] == "text":
        return spec["values"]
    shape = "(" + ", ".join(str(n) for n in spec["shape"]) + (",)" if len(spec["shape"]) == 1 else ")")
    if spec["values"] is None:
        return f"shape {shape} (too big to print; --dump DIR saves it)"
    a = np.asarray(spec["values"], dtype=spec["dtype"])     # integers stay integers: positions [8], not [8.]
    text = np.array2string(a, precision=5, max_line_width=80, suppress_small=False)
    return f"shape {shape}\n" + "\n".join("        " + line for line in text.splitlines())


def smallest_lines(ev, dump_requested):
    """The smallest failing case, with its inputs and the expected and received arrays."""
    if ev is None:
        return []
    found = " (found by drawing more cases)" if ev.get("extra") else ""
    lines = [f"smallest failing case: case {ev['index'] + 1}{found}: {ev['desc']}"]
    total = sum(int(np.prod(s["shape"])) for s in ev["inputs"].values())
    for k, spec in ev["inputs"].items():
        if total <= 40 or not spec["shape"]:
            lines.append(f"  input {k}: " + _fmt_array(spec) if spec["shape"] else
                         f"  input {k} = {spec['values'] if spec['dtype'] == 'text' else repr(spec['values'])}")
    if total > 40:
        lines.append("  inputs: " + ", ".join(f"{k} {tuple(s['shape'])}" for k, s in ev["inputs"].items()
                                              if s["shape"]))
    for name in ev.get("wrong", [])[:3]:
        if name in ev["expected"] and name in ev["got"]:
            lines.append(f"  {name} expected: " + _fmt_array(ev["expected"][name]))
            lines.append(f"  {name} received: " + _fmt_array(ev["got"][name]))
    if ev.get("failure"):
        lines.append(f"  {_short(ev['failure'], 200)}")
    if ev.get("dump"):
        lines.append(f"  saved to {ev['dump']} (np.load: input.*, expected.*, got.*)")
    elif not dump_requested:
        lines.append("  (`drill check FILE --dump DIR` saves it as .npz)")
    return lines
