"""What the worker learns about a failing file beyond "wrong": the options its failing cases share, the
smallest failing case, and a gradient check of the candidate's *own* code.

* :func:`case_features` — a case's options as phrases: every scalar input (``approximate``, ``causal``,
  ``num_heads`` ...), whether each optional array was given (``mask``), ``Case.options`` and the tags;
  the report says which of them every failing case and no passing case has.
* :func:`smallest_failing` — shrinking by search: among the graded failing cases and more cases drawn
  with the same seed (within a time budget), the one with the fewest input elements.
* :func:`grad_check` — central finite differences of the candidate's forward (float64), compared with
  what the candidate's backward returned, per input and per parameter: a backward that disagrees with
  its own forward is a backward bug; one that agrees while the forward is wrong means "fix the forward".
"""

from __future__ import annotations

import copy
import os
import time

import numpy as np

#: a gradient agrees with the finite differences of its forward to this normwise relative error
#: (central differences with h = 1e-6 in float64 are good to ~1e-9; ReLU kinks are rarely hit)
FD_TOL = 1e-5
FD_STEP = 1e-6
FD_MAX_ELEMENTS = 24          # per input: every element of a small one, a seeded sample of a big one


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
    return sorted(feats)


def input_size(inputs):
    n = 0
    for v in inputs.values():
        if isinstance(v, np.ndarray):
            n += v.size
        elif isinstance(v, dict):
            n += input_size(v)
    return n


def smallest_failing(ex, failing, grade, draw, first_extra, budget_s=0.4):
    """``(index, case)`` of the smallest failing case.

    ``failing``: ``[(index, case)]`` already known to fail; ``grade(case) -> bool`` (True: fails);
    ``draw(i)`` draws case ``i``. Cases ``first_extra, first_extra + 1, ...`` are tried until the budget
    is spent, keeping any failing case smaller than the best so far.
    """
    best = min(failing, key=lambda ic: (input_size(ic[1].inputs), ic[0]))
    t0 = time.perf_counter()
    i = first_extra
    while time.perf_counter() - t0 < budget_s and i < first_extra + 400:
        case = draw(i)
        if input_size(case.inputs) < input_size(best[1].inputs):
            if grade(case):
                best = (i, case)
        i += 1
    return best


def _get(inputs, path):
    obj = inputs
    for part in path:
        obj = obj[part] if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


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


def grad_check(ex, module, inputs, ref_outputs, user_outputs, run, seed=0, budget_s=3.0):
    """Compare the candidate's gradients with central differences of the candidate's own forward.

    ``run(ns, inputs, forward_only) -> outputs``. Returns ``[{"name", "input", "consistent", "rel",
    "n"}]`` for each gradient the backward returned (empty when there is nothing to check); a slow
    forward stops the check after ``budget_s`` seconds with what was measured so far.
    """
    t0 = time.perf_counter()
    loss, upstream, targets = grad_targets(ex, inputs, ref_outputs)
    if upstream is None or not targets:
        return []
    up = np.asarray(inputs[upstream], dtype=np.float64)

    def objective(inp):
        out = run(module, inp, True).get(loss)
        try:
            val = float(np.sum(up * np.asarray(out, dtype=np.float64)))
        except Exception:  # noqa: BLE001 - whatever the user returned
            return None
        return val if np.isfinite(val) else None

    if objective(inputs) is None:
        return []
    rng = np.random.default_rng(seed)
    report = []
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
        picks = range(n) if n <= FD_MAX_ELEMENTS else rng.choice(n, FD_MAX_ELEMENTS, replace=False)
        num, ana = [], []
        for flat in picks:
            if time.perf_counter() - t0 > budget_s:
                break
            idx = np.unravel_index(int(flat), base.shape)
            vals = []
            for sign in (1.0, -1.0):
                inp = copy.deepcopy(inputs)
                arr = _get(inp, path)
                arr[idx] += sign * FD_STEP
                vals.append(objective(inp))
            if None in vals:
                continue
            num.append((vals[0] - vals[1]) / (2 * FD_STEP))
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
