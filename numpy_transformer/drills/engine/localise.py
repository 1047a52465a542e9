"""Localisation in composite exercises: which sub-block of a layer first goes wrong.

Two checks, both in the judge (the parent), both on the smallest failing case, each a verified fact:

* **switching a sub-block off**: the exercise's ``LOCALISE["switch_off"]`` lists sub-blocks with the
  input edits that remove them (``{"params.W2": 0, "params.b2": 0}`` zeroes the feed-forward's
  output; ``{"mask": None}`` drops the mask; ``{"num_heads": 1}`` makes the head split and merge
  identities). The candidate's functions (in the grading child) and the reference run on the edited
  inputs; when every array then agrees (but the gradients of the zeroed weights, which still depend
  on their inputs), the mistake lies in that sub-block (or shows only through it).
* **the backward's order**: ``LOCALISE["backward"]`` (or a function of the case's inputs giving it)
  lists the sub-blocks in the order the backward visits them, each with the gradients it produces.
  When the forward is right, the first sub-block whose gradients are wrong, after sub-blocks whose
  gradients are all right, is where the backward first goes wrong.

:func:`localise` returns the ``localise`` event's fields; :func:`lines` turns them into the report's
section.
"""

from __future__ import annotations

import copy

import numpy as np

from . import diagnose


def _edit(inputs, edits):
    """``inputs`` with ``edits`` applied (``"params.W2": 0`` zeroes that array; other values replace)."""
    out = copy.copy(inputs)
    for path, value in edits.items():
        head, _, tail = path.partition(".")
        if tail:
            out[head] = dict(out[head])
            target, key = out[head], tail
        else:
            target, key = out, head
        if key not in target:
            return None
        target[key] = np.zeros_like(target[key]) if isinstance(value, (int, float)) and value == 0 \
            and isinstance(target[key], np.ndarray) else value
    return out


def _wrong(ex, got, ref, tol, edits=()):
    """The outputs of ``got`` that differ from ``ref`` (or are missing), but for the gradients of the
    arrays ``edits`` zeroed (a switched-off weight's gradient still depends on its input)."""
    skip = set()
    for path in edits:
        key = path.rpartition(".")[2]
        skip |= {f"d{key}", f"grads[{key}]"}
    return [n for n, _ in ex.outputs if n not in skip
            and (n not in got or not diagnose.compare(got[n], ref[n], tol)["ok"])]


def localise(ex, inputs, got, ref, run_many, reference, tol):
    """The ``localise`` event's fields for the failing case ``inputs`` (``got``: the candidate's outputs,
    ``ref``: the reference's), or None when the exercise declares no sub-blocks.

    ``run_many(inputs_list)`` returns the candidate's outputs on each inputs (the child runs them all in
    one request), None for those on which its functions failed; ``reference(inputs)`` the reference's."""
    spec = getattr(ex, "localise", None)
    if not spec:
        return None
    wrong = _wrong(ex, got, ref, tol)
    fixed, still = [], []
    blocks = [(block, edits, _edit(inputs, edits)) for block, edits in spec.get("switch_off", ())]
    blocks = [b for b in blocks if b[2] is not None]
    with np.errstate(all="ignore"):
        mine_all = run_many([edited for _, _, edited in blocks]) if blocks else []
        for (block, edits, edited), mine in zip(blocks, mine_all):
            if mine is None:
                continue
            (still if _wrong(ex, mine, reference(edited), tol, edits) else fixed).append(block)
    first = None
    order = spec.get("backward")
    if callable(order):
        order = order(inputs)
    if order and ex.outputs[0][0] not in wrong:
        right = []
        for block, names in order:
            bad = [n for n in names if n in wrong]
            if bad:
                first = {"block": block, "wrong": bad, "right_before": right[-3:]}
                break
            right.append(block)
    if not fixed and not first and not still:
        return None
    return {"fixed_by": fixed, "still_wrong": still, "backward_first": first}


def lines(ev):
    """The report's "where it goes wrong" section."""
    if not ev:
        return []
    out = ["where it goes wrong (sub-blocks switched off on the smallest failing case, yours and the "
           "reference's both run):"]
    if ev["fixed_by"]:
        out.append(f"  * with {ev['fixed_by'][0]} switched off every array agrees: the mistake is in "
                   f"{ev['fixed_by'][0]} (or shows only through it)")
        if len(ev["fixed_by"]) > 1:
            out.append(f"    (switching off {', '.join(ev['fixed_by'][1:])} also hides it)")
    elif ev["still_wrong"]:
        which = (", ".join(ev["still_wrong"]) if len(ev["still_wrong"]) <= 3 else
                 f"its {len(ev['still_wrong'])} sub-blocks ({', '.join(ev['still_wrong'][:2])} ...)")
        out.append(f"  * still wrong with each of {which} switched off in turn: the mistake is "
                   "not inside any one of them alone (look at the residuals, the norms, how the sub-blocks "
                   "are wired)")
    first = ev.get("backward_first")
    if first:
        out.append(f"  * the forward is right; the backward first goes wrong at {first['block']} "
                   f"({', '.join(first['wrong'])} wrong; "
                   + (f"right before it: {', '.join(first['right_before'])})" if first["right_before"] else
                      "the first sub-block the backward visits)"))
    return out
