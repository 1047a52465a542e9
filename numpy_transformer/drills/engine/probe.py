"""What the worker learns about a failing file beyond "wrong": the options its failing cases share, the
smallest failing case, and a gradient check of the candidate's *own* code.

* :func:`case_features` — a case's options as phrases: every scalar input (``approximate``, ``causal``,
  ``num_heads`` ...), whether each optional array was given (``mask``), ``Case.options`` and the tags;
  the report says which of them every failing case and no passing case has.
* :func:`smallest_failing` — shrinking by search: among the graded failing cases and more cases drawn
  with the same seed (a bounded number, the smallest of them run in one request), the one with the
  fewest input elements.
* :func:`grad_check` — central finite differences of the candidate's forward (float64), compared with
  what the candidate's backward returned, per input and per parameter: a backward that disagrees with
  its own forward is a backward bug; one that agrees while the forward is wrong means "fix the forward".
"""

from __future__ import annotations

import copy
import os

import numpy as np

#: a gradient agrees with the finite differences of its forward to this normwise relative error
#: (central differences with h = 1e-6 in float64 are good to ~1e-9; ReLU kinks are rarely hit)
FD_TOL = 1e-5
FD_STEP = 1e-6
FD_MAX_ELEMENTS = 24          # per input: every element of a small one, a seeded sample of a big one
FD_MAX_TOTAL = 64             # over all the inputs (a layer with many weights gets fewer per weight)


def case_features(case):
    """A case's options as phrases ("when approximate='tanh'", "with a mask", "with repeated ids") for the
    "fails only ..." summary: the scalar inputs, whether each optional input was given, ``Case.options``
    (True -> "with NAME", False -> "without NAME", a string -> "with STRING", else "when NAME=VALUE"; an
    option named like an input replaces that input's phrase) and the tags."""
    feats = set()
    for k, v in case.inputs.items():
        if k in case.options:
            continue                        # the exercise names this option itself
        if v is None:
            feats.add(f"without a {k}")
        elif isinstance(v, (bool, np.bool_)):
            feats.add(f"when {k}={bool(v)}")
        elif isinstance(v, str):
            feats.add(f"when {k}={v!r}")
        elif isinstance(v, (int, np.integer)) and not k.startswith("d"):
            feats.add(f"when {k}={int(v)}")
        elif isinstance(v, np.ndarray) and v.dtype == bool:
            feats.add(f"with a {k}")
    for k, v in case.options.items():
        if v is True:
            feats.add(f"with {k}")
        elif v is False:
            feats.add(f"without {k}")
        elif isinstance(v, str):
            feats.add(f"with {v}")          # a label, e.g. {"norm_first": "pre-LN"}
        else:
            feats.add(f"when {k}={v!r}")
    feats.update(f"with {t}" for t in case.tags)
    # an option and a tag that say the same ("with offset > 0", "with offset > 0 (decode step)"): the longer
    return sorted(f for f in feats if not any(g.startswith(f + " (") for g in feats))


def input_size(inputs):
    n = 0
    for v in inputs.values():
        if isinstance(v, np.ndarray):
            n += v.size
        elif isinstance(v, dict):
            n += input_size(v)
    return n


#: shrinking: how many more cases are drawn (drawing is cheap: no run), and how many of the smallest of
#: them are run (in one request to the grading child) to find the smallest failing one
SHRINK_DRAWS = 120
SHRINK_RUNS = 8


def shrink_candidates(failing, draw, first_extra, draws=SHRINK_DRAWS, runs=SHRINK_RUNS):
    """``(best, smaller)``: the smallest known failing ``(index, case)`` and, smallest first, the at most
    ``runs`` cases among ``first_extra`` to ``first_extra + draws - 1`` (drawn by ``draw(i)``) that are
    smaller still (fewest input elements, then the lowest index)."""
    def size(ic):
        return (input_size(ic[1].inputs), ic[0])

    best = min(failing, key=size)
    smaller = [ic for ic in ((i, draw(i)) for i in range(first_extra, first_extra + draws)) if size(ic) < size(best)]
    return best, sorted(smaller, key=size)[:runs]


def smallest_failing(ex, failing, grade_many, draw, first_extra, draws=SHRINK_DRAWS, runs=SHRINK_RUNS):
    """``(index, case)`` of the smallest failing case.

    ``failing``: ``[(index, case)]`` already known to fail; ``grade_many([case, ...]) -> [bool, ...]``
    (True: fails), one call; ``draw(i)`` draws case ``i``. Cases ``first_extra`` to ``first_extra + draws
    - 1`` are drawn; the ``runs`` smallest of those smaller than the best known are graded at once, and
    the smallest that fails wins (fewest input elements, then the lowest index). The cost is bounded by
    counts, not by a clock, so the same seed gives the same smallest case on a busy machine too.
    """
    best, smaller = shrink_candidates(failing, draw, first_extra, draws, runs)
    if smaller:
        for ic, fails in zip(smaller, grade_many([c for _, c in smaller])):
            if fails:
                return ic
    return best


def _get(inputs, path):
    obj = inputs
    for part in path:
        obj = obj[part] if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def _perturbed(inputs, path, flat, step):
    """A copy of ``inputs`` with element ``flat`` of the array at ``path`` moved by ``step`` (what the
    grading child builds for a ``perturb`` request)."""
    inp = copy.deepcopy(inputs)
    target = _get(inp, path)
    target[np.unravel_index(flat, target.shape)] += step
    return inp


def grad_targets(ex, inputs, ref_outputs):
    """``(loss output, upstream input, {grad output: input path})``, from ``ex.grad_check`` or the names."""
    spec = ex.grad_check or {}
    fwd_name, fwd_fn = ex.outputs[0]
    loss = spec.get("loss", fwd_name)
    targets = {}
    if "grads" in spec:
        targets = {g: tuple(p.split(".")) for g, p in spec["grads"].items()}
    else:
        for name, fn in ex.outputs:
            if fn == fwd_fn:
                continue
            if name.startswith("grads[") and name.endswith("]"):
                path = ("params", name[6:-1])
            elif name.startswith("d") and name[1:] in inputs:
                path = (name[1:],)
            else:
                continue
            arr = _get(inputs, path)
            if isinstance(arr, np.ndarray) and arr.dtype.kind == "f":
                targets[name] = path
    upstream = spec.get("upstream")
    if upstream is None:
        shape = np.shape(ref_outputs.get(loss))
        upstream = next((k for k, v in inputs.items() if k.startswith("d") and k[1:] not in inputs
                         and np.shape(v) == shape and v is not None), None)
    return loss, upstream, targets


def grad_check(ex, module, inputs, ref_outputs, user_outputs, run_many, seed=0, max_total=FD_MAX_TOTAL,
               run_points=None):
    """Compare the candidate's gradients with central differences of the candidate's own forward.

    ``run_many(inputs_list) -> [outputs, ...]``: the candidate's forward on each inputs (one request to
    the grading child for all of them); or, when given, ``run_points(inputs, points) -> [outputs, ...]``:
    its forward on ``inputs`` then on ``inputs`` with each point ``(path, flat index, step)`` applied
    (the child builds those copies: :meth:`.candidate.Candidate.run_perturbed`). Returns ``[{"name",
    "input", "consistent", "rel", "n"}]`` for each gradient the backward returned (empty when there is
    nothing to check). Every element of a
    small input is perturbed, a seeded sample of a big one: at most :data:`FD_MAX_ELEMENTS` per input and
    ``max_total`` over all of them (two forwards each).
    """
    loss, upstream, targets = grad_targets(ex, inputs, ref_outputs)
    if upstream is None or not targets:
        return []
    up = np.asarray(inputs[upstream], dtype=np.float64)

    def objective(outputs):
        out = outputs.get(loss)
        try:
            val = float(np.sum(up * np.asarray(out, dtype=np.float64)))
        except Exception:  # noqa: BLE001 - whatever the user returned
            return None
        return val if np.isfinite(val) else None

    rng = np.random.default_rng(seed)
    per_input = max(2, min(FD_MAX_ELEMENTS, max_total // max(len(targets), 1)))
    plan, points = [], []                       # (gradient, path, got, [element index ...]); the forwards to run
    for gname, path in targets.items():
        got = user_outputs.get(gname)
        base = _get(inputs, path)
        try:
            got = np.asarray(got, dtype=np.float64)
        except Exception:  # noqa: BLE001
            continue
        if got.shape != base.shape or not np.all(np.isfinite(got)):
            continue
        n = base.size
        picks = [int(flat) for flat in (range(n) if n <= per_input else rng.choice(n, per_input, replace=False))]
        points += [(path, flat, sign * FD_STEP) for flat in picks for sign in (1.0, -1.0)]
        plan.append((gname, path, got, [np.unravel_index(flat, base.shape) for flat in picks]))
    if not plan:
        return []
    if run_points is not None:
        values = [objective(o) for o in run_points(inputs, points)]
    else:
        values = [objective(o) for o in run_many([inputs] + [_perturbed(inputs, *p) for p in points])]
    if values[0] is None:
        return []
    report, k = [], 1
    for gname, path, got, idxs in plan:
        num, ana = [], []
        for idx in idxs:
            plus, minus = values[k], values[k + 1]
            k += 2
            if plus is None or minus is None:
                continue
            num.append((plus - minus) / (2 * FD_STEP))
            ana.append(got[idx])
        if not num:
            continue
        num, ana = np.array(num), np.array(ana)
        scale = max(float(np.max(np.abs(num))), float(np.max(np.abs(ana))), 1e-8)
        rel = float(np.max(np.abs(num - ana))) / scale
        report.append({"name": gname, "input": ".".join(path), "consistent": rel <= FD_TOL, "rel": rel,
                       "n": len(num)})
    return report


def dump_case(directory, exercise, index, inputs, expected, got):
    """Save the case (inputs, expected and received arrays) as ``DIR/<exercise>_case<N>.npz``."""
    os.makedirs(directory, exist_ok=True)
    arrays = {}

    def put(prefix, d):
        for k, v in d.items():
            if isinstance(v, dict):
                put(f"{prefix}{k}.", v)
            elif v is not None:
                try:
                    a = np.asarray(v)
                except Exception:  # noqa: BLE001
                    continue
                if a.dtype != object:
                    arrays[f"{prefix}{k}"] = a
    put("input.", inputs)
    put("expected.", expected)
    put("got.", got)
    path = os.path.join(directory, f"{exercise}_case{index + 1}.npz")
    np.savez(path, **arrays)
    return path
