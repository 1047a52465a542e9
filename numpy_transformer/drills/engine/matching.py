"""Which known mistake reproduces a wrong array: the patched solutions run on a case and matched, in the
judge (the parent), bounded by counts.

A known mistake (a listed one of the exercise's ``mistakes.py``, or a member of an op family) is a
patch of the solution (:meth:`.definition.Exercise.variant`); running it on a failing case and comparing
its outputs with the candidate's says whether the candidate makes it. What bounds the cost:

* :class:`Shortlist` — every known mistake runs on the first failing case only; from then on only those
  still possible: the ones that reproduced a wrong array on the first case where they changed an output,
  and those that have changed nothing yet (their code is not reached by the cases so far);
* :func:`variants_wrong` — an output a patch leaves alone comes out bit for bit as the unpatched
  solution's, so it takes the solution's verdict (compared once) instead of a comparison of its own;
* :func:`match_pairs` — two mistakes at once, on the first case that needs them (at most
  :data:`MAX_PAIR_RUNS` runs), then only the pairs that matched there;
* :class:`ReadingBudget` — the verified readings of an array (:mod:`.readings`, each a few runs of the
  reference) are looked for only while one could still hold on half of its failing cases.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from . import diagnose, readings
from .diagnosis import VERIFIED
from .harness import run_impl

__all__ = ["MAX_PAIR_RUNS", "READING_SHARE", "ReadingBudget", "Shortlist", "match", "match_pairs", "pairs",
           "reference_outputs", "variant_outputs", "variants_wrong"]


def reference_outputs(ex, inputs):
    """The reference's outputs on ``inputs`` (the verified library); raises when the reference fails."""
    rec = run_impl(ex, ex.reference(), inputs, watch=False)
    if rec.failure is not None:
        raise RuntimeError(f"internal error: the reference failed on this case: {rec.failure['message']}")
    return rec.outputs


def variant_outputs(ex, inputs, mistakes=None):
    """``{mistake id: [outputs of each of its patches]}`` for ``mistakes`` (the listed ones by default); a
    variant that fails on a case gives no outputs."""
    out = {}
    for m in ex.mistakes if mistakes is None else mistakes:
        out[m.id] = [run_impl(ex, ex.variant(cfg), inputs, watch=False).outputs for cfg in m.configs]
    return out


def _bits(v):
    """What decides "bit for bit the same": dtype, shape and bytes of an array (None for anything else)."""
    return (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else None


def variants_wrong(ex, inputs, variants, ref, tol, base=None):
    """``{mistake id: [set of the outputs each of its patches gets wrong]}``, compared once per case.

    A patch leaves most outputs' code alone, so they come out bit for bit as the unpatched solution's
    (``base``: its outputs on ``inputs``, run here when not given): such an output is right exactly when
    the solution's is (compared once), with no comparison of its own.
    """
    base = run_impl(ex, ex.variant(), inputs, watch=False).outputs if base is None else base
    right = {n: _bits(v) for n, v in base.items() if n in ref and diagnose.compare(v, ref[n], tol)["ok"]}

    def wrong(n, v):
        if n in right and isinstance(v, np.ndarray) and right[n] is not None and _bits(v) == right[n]:
            return False
        r = ref[n]
        if isinstance(v, np.ndarray) and v.dtype == np.float64 and isinstance(r, np.ndarray) and r.dtype == np.float64 \
                and v.shape == r.shape and v.size and np.isfinite(v).all() and np.isfinite(r).all():
            # compare()'s verdict for finite arrays, without the report it also builds
            err, scale = float(np.max(np.abs(v - r))), float(np.max(np.abs(r)))
            return not ((err / scale if scale > 0 else err) <= tol or err <= diagnose.ATOL)
        return not diagnose.compare(v, r, tol)["ok"]

    return {mid: [{n for n, v in vout.items() if n in ref and wrong(n, v)} for vout in results]
            for mid, results in variants.items()}


def match(mistakes, variants, vwrong, wrong, results, outputs):
    """Record in each wrong output's ``variants`` the ``mistakes`` whose variant reproduces it (``vwrong``:
    what each variant gets wrong, from :func:`variants_wrong`); whether any did."""
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


class Shortlist:
    """The known mistakes one check still runs on its failing cases, bounded by counts (one per check).

    :meth:`todo` is every known mistake (listed, then the families') on the first failing case; after it,
    only the mistakes still possible. A mistake is *decided* on the first failing case where one of its
    patches gets some output wrong: when it reproduces one of the candidate's wrong arrays there it is
    kept for the whole check. When it does not, it stays only while the error lies along the change it
    makes (the one-term-off reading, :func:`.readings.term_off`) on every case where it changes an output,
    and is dropped on the first case where it does not (on a case of one or two elements every change is
    "along", so a tiny first case decides little). A mistake that has changed nothing yet (a mask's, an
    option's code not reached by the cases so far) is run on the next case.
    """

    def __init__(self, ex):
        self.ex = ex
        self.kept, self.along = set(), set()
        self.undecided = None               # None: no failing case seen yet

    def todo(self):
        """The known mistakes to run on the next failing case, in the order of ``ex.known``."""
        if self.undecided is None:
            return self.ex.known
        keep = self.kept | self.along | self.undecided
        return tuple(m for m in self.ex.known if m.id in keep)

    def update(self, tried, variants, vwrong, results, wrong, outputs, ref):
        """Decide the ``tried`` mistakes on a case: ``variants`` their outputs there, ``vwrong`` what each
        patch gets wrong, ``results`` the case's comparisons (with ``variants``: the matches), ``wrong`` its
        wrong arrays, ``outputs`` the candidate's arrays and ``ref`` the reference's."""
        self.undecided = set() if self.undecided is None else self.undecided
        for m in tried:
            if m.id in self.kept:
                continue
            if not any(vwrong[m.id]):
                if m.id not in self.along:
                    self.undecided.add(m.id)
                continue
            self.undecided.discard(m.id)
            if any(m.id in results[n].get("variants", ()) for n in wrong):
                self.kept.add(m.id)
                self.along.discard(m.id)
            elif self._along(m, variants, wrong, outputs, ref):
                self.along.add(m.id)
            else:
                self.along.discard(m.id)

    def _along(self, m, variants, wrong, outputs, ref):
        """Whether the error of some wrong array lies along the change ``m`` makes (one term off)."""
        for name in wrong:
            arr, _ = diagnose.as_array(outputs[name])
            if arr is None or arr.dtype.kind not in "fiu":
                continue
            a, r = arr.astype(np.float64), np.asarray(ref[name], dtype=np.float64)
            if a.shape == r.shape and np.all(np.isfinite(a)) and np.all(np.isfinite(r)) \
                    and readings.term_off(self.ex, name, a, r, {m.id: variants[m.id]}) is not None:
                return True
        return False


#: a verified reading is looked for while it could still hold on this share of an array's failing cases
#: (the report heads with one that holds on three quarters: :func:`.diagnosis.fallback_line`)
READING_SHARE = 0.5


class ReadingBudget:
    """Whether the verified readings of an output are still worth looking for (one per check).

    ``totals``: ``{output: number of failing cases where it is wrong}``. Each case where an output gets no
    verified reading (none holds, or a mistake reproduces it) lowers what any reading could still reach;
    once no reading could hold on :data:`READING_SHARE` of its failing cases, only the cheap observations
    of :func:`.diagnose.hints` are made (no more runs of the reference)."""

    def __init__(self, totals):
        self.totals = dict(totals)
        self.without = Counter()

    def wanted(self, name):
        total = self.totals.get(name, 0)
        return total - self.without[name] >= READING_SHARE * total

    def record(self, name, hints):
        if not any(key.startswith(VERIFIED) for key, _ in hints or ()):
            self.without[name] += 1


#: the pair search's bound: at most this many runs of two mistakes combined, on the first case that needs it
MAX_PAIR_RUNS = 240


def pairs(ex):
    """Every two configurations of two different known mistakes: ``((id1, id2), config1, config2)``."""
    ms = ex.mistakes                 # the listed ones (the families' pairs would cost too much)
    for i in range(len(ms)):
        for j in range(i + 1, len(ms)):
            for c1 in ms[i].configs:
                for c2 in ms[j].configs:
                    yield (ms[i].id, ms[j].id), c1, c2


def match_pairs(ex, inputs, results, user_outputs, ref, tol, state):
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
    tries = list(pairs(ex))[:MAX_PAIR_RUNS] if first else state["candidates"]
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
