"""Generic readings of a wrong array: what the error *is*, computed from the numbers, in the judge.

A known mistake is recognised by running its patch; a reading needs no list. Each reading is a
claim about the candidate's array ``got`` that the numbers verify to :data:`VERIFY` (relative to the
array's size) before it is made:

* **scaled by a constant**: ``got == c * expected``; ``c`` is named when it is a factor the case
  has (``1/sqrt(Dh)``, ``1/(1-p)``, an axis length ``N`` or ``1/N``, ``2``, ``-1``) and what such a
  factor usually comes from is said (a mean where a sum belongs, a forgotten scale ...);
* **transposed**, **flipped in sign** (``c = -1``);
* **an option ignored**: ``got`` is what the reference gives with one of the case's options switched
  off or flipped (a flag such as ``training`` or ``causal`` flipped, a boolean mask negated or dropped,
  ``p`` or ``label_smoothing`` set to 0);
* **two results swapped**: ``got`` is the expected value of another returned array (``dq`` holding
  ``dk``: a product rule's factors, or the return order);
* **the wrong axis**: ``got`` is the reference computed with another axis in the last one's place (a
  softmax, norm or sum over the wrong axis);
* **the upstream gradient forgotten**: ``got * dy == expected`` (the local derivative alone);
* **dout replaced by the forward's input or output**: ``got`` is what the right formula gives with the
  upstream gradient replaced by an input, or by a forward output (``y`` for ``dy``), of the same shape
  (the reference is run on those inputs);
* **the backward at the wrong point**: ``got`` is the right gradient with a forward input replaced by a
  forward output of its shape (a cache keeping ``y`` where ``x`` belongs);
* **the wrong order, place or dtype** (:mod:`.layout`): results returned in each other's places (their
  shapes differ), values reversed along an axis, a reshape that needed a transpose, an integer dtype;
* **one additive term off**: the error ``got - expected`` lies along the term that a known mistake
  removes (the reference's term, from that mistake's variant): ``got = expected + c * term``; with
  ``c = -1`` the term is missing, otherwise it is scaled wrongly (``1 + c`` times);
* the observations of :func:`.diagnose.hints` (a reshape, extra axes, NaN, float32 ...).

:func:`read` returns ``(key, message)`` pairs; ``key`` is the same on every case with the same reading,
so the report can say on how many failing cases it holds.
"""

from __future__ import annotations

import numpy as np

from . import diagnose, layout

#: a reading is claimed only when it reproduces the array to this relative error (float64 noise is
#: ~1e-15; a wrong formula is off by far more)
VERIFY = 1e-9

#: where a constant factor usually comes from, by its name
ORIGINS = {
    "-1": "a sign flipped (a gradient added where it is subtracted, or a - b written b - a)",
    "2": "a factor 2 (the derivative of a square, or one term counted twice)",
    "1/2": "half (a factor 2 missing, or a term counted once where it appears twice)",
}


def memo(reference):
    """``reference`` (inputs -> outputs) remembering its answers for the same input objects (one case's
    readings ask for the same swapped inputs once per wrong array)."""
    answers = {}

    def call(inputs):
        key = tuple((k, id(v)) for k, v in inputs.items())
        if key not in answers:
            answers[key] = reference(inputs)
        return answers[key]
    return call


def _rel(a, b):
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return float(np.max(np.abs(a - b), initial=0.0)) / (scale or 1.0)


def _origin(name):
    """Where a factor named ``name`` by the case (``Case.factors``) usually comes from."""
    if "Dh" in name or name == "sqrt(D)":
        return "the attention scale 1/sqrt(Dh): forgotten, applied twice, or taken with the wrong width"
    if "p" in name:
        return "the inverted-dropout scale 1/(1-p): forgotten, applied twice, or inverted"
    if name.startswith("d"):
        return f"the upstream gradient {name}: forgotten or applied twice"
    return (f"a sum where a mean over {name} items belongs, or the reverse (a gradient of a mean is "
            f"divided by {name})")


def _factor_names(case):
    """``[(value, name, key, origin)]``: the constants this case makes plausible."""
    out = []
    for name, v in (case.factors or {}).items():
        v = float(v)
        if v in (0.0, 1.0, -1.0):
            continue
        why = _origin(name)
        inv = f"1/{name}" if name.isidentifier() else f"1/({name})"
        out += [(v, f"{name} (= {v:.6g})", name, why), (1.0 / v, f"{inv} (= {1.0 / v:.6g})", inv, why)]
    # the case's own factors first (sqrt(Dh) = 2 is named as the scale, not as "2")
    out += [(-1.0, "-1", "-1", ORIGINS["-1"]), (2.0, "2", "2", ORIGINS["2"]), (0.5, "1/2", "1/2", ORIGINS["1/2"])]
    seen = set()
    for k, a in case.inputs.items():
        for axis, n in enumerate(np.shape(a) if isinstance(a, np.ndarray) else ()):
            if n > 1 and n not in seen:
                seen.add(n)
                where = f"axis {axis} of {k}"
                out.append((float(n), f"N={n} (the length of {where})", f"N:{where}",
                            "a sum where a mean belongs (or a mean's gradient not divided by N)"))
                out.append((1.0 / n, f"1/N, N={n} (the length of {where})", f"1/N:{where}",
                            "a mean where a sum belongs (or a sum's gradient divided by N)"))
    return out


def scaled(got, ref, case):
    """``got == c * ref`` for a constant ``c != 1``: the first reading, or None (:func:`scalings`)."""
    found = scalings(got, ref, case)
    return found[0] if found else None


def scalings(got, ref, case):
    """``got == c * ref`` for a constant ``c != 1``: a reading per name ``c`` has here (``2`` may be
    ``sqrt(Dh)`` and ``Dh`` too: the report keeps the name that holds on most failing cases)."""
    if got.shape != ref.shape or not np.any(ref):
        return []
    c = float(np.sum(got * ref) / np.sum(ref * ref))
    if abs(c - 1.0) < 1e-9 or _rel(got, c * ref) > VERIFY:
        return []
    out = []
    for v, name, key, origin in _factor_names(case):
        if abs(c - v) <= 1e-9 * max(1.0, abs(v)):
            if ref.size < 3 and key in ("-1", "2", "1/2"):
                continue                  # one or two numbers: any wrong value is "a factor" of them
            named = "" if name == f"{c:.6g}" else f" = {name}"
            out.append(("scaled:" + key, f"off by a constant factor {c:.6g}{named} (verified to {VERIFY:.0e}): "
                                         f"{origin}"))
    if out or ref.size < 3:
        return out                        # an unnamed factor of one or two numbers says nothing
    return [("scaled:other", f"off by a constant factor {c:.6g} (verified to {VERIFY:.0e})")]


def upstream_forgotten(case, got, ref):
    """``got * dy == ref`` for an upstream gradient ``dy`` of ``got``'s shape (the chain rule's last
    factor left out): the reading, or None."""
    for up, g in case.inputs.items():
        if up.startswith("d") and isinstance(g, np.ndarray) and g.shape == got.shape and np.all(g != 0):
            if _rel(got * g, ref) <= VERIFY:
                return (f"forgot:{up}", f"times {up} gives the expected array (verified to {VERIFY:.0e}): the "
                                        f"backward returns the local derivative and forgets to multiply by "
                                        f"the upstream gradient {up} (the chain rule)")
    return None


def upstream_replaced(ex, case, name, got, reference, refs=None):
    """``got`` equals the reference's ``name`` with an upstream gradient (``d*`` input) replaced by a
    forward input, or by a forward output (``refs``: the case's expected arrays), of the same shape:
    the reading, or None. ``reference(inputs)`` runs the reference."""
    arrays = {k: v for k, v in case.inputs.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    outputs = {k: np.asarray(v, dtype=np.float64) for k, v in (refs or {}).items()
               if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not k.startswith("d")}
    stand_ins = [(k, x, "the forward's input") for k, x in arrays.items() if not k.startswith("d")]
    stand_ins += [(k, x, "the forward's output") for k, x in outputs.items() if k not in arrays]
    for up, g in arrays.items():
        if not up.startswith("d"):
            continue
        for k, x, what in stand_ins:
            if k == up or x.shape != g.shape:
                continue
            swapped = dict(case.inputs, **{up: x})
            try:
                with np.errstate(all="ignore"):
                    alt = reference(swapped).get(name)
            except Exception:  # noqa: BLE001 - a reading is optional
                continue
            if alt is not None and np.shape(alt) == got.shape and _rel(got, np.asarray(alt)) <= VERIFY:
                return (f"upstream:{up}->{k}",
                        f"what the right formula gives with {up} replaced by {k} ({what}; "
                        f"verified to {VERIFY:.0e}): the backward uses {k} where the upstream gradient "
                        f"{up} belongs")
    return None


#: the masks negated so far, by identity (the same negation each time: the memoised reference answers once)
_NEGATED = {}


def _negated(mask):
    if len(_NEGATED) > 64:
        _NEGATED.clear()
    held = _NEGATED.get(id(mask))
    if held is None or held[0] is not mask:
        held = _NEGATED[id(mask)] = (mask, ~mask)
    return held[1]


def wrong_point(case, name, got, reference, refs=None):
    """``got`` equals the reference's gradient ``name`` with a forward input replaced by a forward output
    of the same shape (the backward evaluated at the output: a cache that keeps ``y`` where ``x``
    belongs): the reading, or None."""
    if not name.startswith("d") and "grad" not in name:
        return None
    outputs = {k: np.asarray(v, dtype=np.float64) for k, v in (refs or {}).items()
               if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not k.startswith("d") and "grad" not in k
               and k not in case.inputs}
    for k, x in case.inputs.items():
        if k.startswith("d") or not isinstance(x, np.ndarray) or x.dtype.kind != "f":
            continue
        for o, y in outputs.items():
            if y.shape != x.shape:
                continue
            try:
                with np.errstate(all="ignore"):
                    alt = reference(dict(case.inputs, **{k: y})).get(name)
            except Exception:  # noqa: BLE001 - a reading is optional
                continue
            if alt is not None and np.shape(alt) == got.shape and _rel(got, np.asarray(alt)) <= VERIFY:
                return (f"point:{k}->{o}",
                        f"what the right formula gives at {k} = {o} (verified to {VERIFY:.0e}): the backward "
                        f"is evaluated at the forward's output {o} where its input {k} belongs (the cache "
                        f"keeps {o}, or {o} is read where {k} should be)")
    return None


def _toggled(case):
    """``[(description, key, why, inputs)]``: the case with one option switched off or flipped: a flag (bool)
    flipped first, then a boolean mask negated (its polarity read the other way round) or dropped, then a
    float option such as ``p`` or ``label_smoothing`` set to 0 (a flag explains more than a value: with
    ``training`` off, ``p`` does nothing either)."""
    flags, masks, values = [], [], []
    for k, v in case.inputs.items():
        if isinstance(v, (bool, np.bool_)):
            flags.append((f"{k}={not v}", k, f"the flag {k} is ignored or read the other way round (inverted)",
                          dict(case.inputs, **{k: not v})))
        elif isinstance(v, np.ndarray) and v.dtype == bool and "mask" in k:
            masks.append((f"{k} negated (~{k})", f"~{k}", f"the mask's polarity is inverted: {k}'s True read "
                          "as may attend where it means masked, or the reverse", dict(case.inputs, **{k: ~v})))
            masks.append((f"{k}=None (no {k})", k, f"{k} is ignored (never applied)",
                          dict(case.inputs, **{k: None})))
        elif isinstance(v, float) and v != 0.0 and not k.startswith("d"):
            values.append((f"{k}=0", k, f"{k} is ignored or read the other way round",
                           dict(case.inputs, **{k: 0.0})))
    return flags + masks + values


def option_ignored(case, name, got, reference):
    """``got`` is what the reference gives with one of the case's options switched off or flipped: the
    reading, or None."""
    for what, key, why, changed in _toggled(case):
        try:
            with np.errstate(all="ignore"):
                alt = reference(changed).get(name)
        except Exception:  # noqa: BLE001 - a reading is optional
            continue
        if alt is None or np.shape(alt) != got.shape or not np.all(np.isfinite(alt)):
            continue
        if _rel(got, np.asarray(alt, dtype=np.float64)) <= VERIFY:
            return (f"option:{key}", f"what the right formula gives with {what} (verified to {VERIFY:.0e}): "
                                     f"{why}")
    return None


def wrong_axis(case, name, got, reference):
    """``got`` is the reference computed over another axis (every array input of the same shape, and the
    result, with that axis swapped with the last): the reading, or None."""
    arrays = [k for k, v in case.inputs.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    shapes = {case.inputs[k].shape for k in arrays}
    if len(shapes) != 1 or got.ndim < 2:
        return None
    shape = shapes.pop()
    if got.shape != shape:
        return None
    for axis in range(got.ndim - 1):
        if shape[axis] < 2:
            continue
        changed = dict(case.inputs, **{k: np.swapaxes(case.inputs[k], axis, -1) for k in arrays})
        try:
            with np.errstate(all="ignore"):
                alt = reference(changed).get(name)
        except Exception:  # noqa: BLE001 - a reading is optional
            continue
        if alt is not None and np.shape(alt) == got.shape[:axis] + (got.shape[-1],) + got.shape[axis + 1:-1] \
                + (got.shape[axis],) and _rel(got, np.swapaxes(np.asarray(alt, dtype=np.float64), axis, -1)) <= VERIFY:
            return (f"axis:{axis}", f"the right formula computed over axis {axis} instead of the last axis "
                                    f"(verified to {VERIFY:.0e}): a sum, max or mean reduced over the wrong axis")
    return None


def swapped_outputs(name, got, refs):
    """``got`` is the expected value of another returned array: the reading, or None."""
    for other, r in refs.items():
        r = np.asarray(r, dtype=np.float64) if r is not None else None
        if other == name or r is None or r.shape != got.shape or not np.any(r):
            continue
        if _rel(got, r) <= VERIFY:
            return (f"swapped:{other}", f"holds what {other} should be (verified to {VERIFY:.0e}): two "
                                        "results swapped (the two factors of a product rule, or the return order)")
    return None


def term_off(ex, name, got, ref, variants):
    """The error ``got - ref`` lies along the term some known mistake removes: the reading, or None."""
    err = got - ref
    if not np.any(err):
        return None
    for m in ex.known:
        for vout in variants.get(m.id, ()):
            v = vout.get(name)
            if v is None or np.shape(v) != got.shape:
                continue
            term = np.asarray(v, dtype=np.float64) - ref
            tt = float(np.sum(term * term))
            if not np.all(np.isfinite(term)) or tt == 0.0:
                continue
            c = float(np.sum(err * term) / tt)
            if abs(c) < 1e-9 or _rel(err, c * term) > 1e-7:
                continue
            if abs(c - 1.0) < 1e-7:
                continue                      # the mistake itself (named by the matching)
            kept = "its sign flipped" if abs(c - 2.0) < 1e-7 else f"{1.0 - c:.4g} times it instead of once"
            return (f"term:{m.id}",
                    f"the error is exactly {c:.4g} times the change that '{m.title}' makes (verified to "
                    f"1e-7): one additive term is off, the one that mistake removes; yours has {kept}")
    return None


def read(ex, case, name, got, ref, variants, reference, refs=None):
    """Every verified reading of the wrong array ``got`` (output ``name``), strongest first. ``refs``:
    every expected array of the case (for two results swapped)."""
    arr, problem = diagnose.as_array(got)
    out = []
    if arr is not None and layout.integer_dtype(arr, ref) is not None:
        out.append(layout.integer_dtype(arr, ref))
    elif arr is not None and arr.dtype.kind in "fiu":
        a = arr.astype(np.float64)
        r = np.asarray(ref, dtype=np.float64)
        if a.shape != r.shape and np.all(np.isfinite(a)):
            reading = layout.returned_swapped(name, a, refs or {})
            out += [reading] if reading is not None else []
        elif a.shape == r.shape and np.all(np.isfinite(a)) and np.all(np.isfinite(r)):
            out += scalings(a, r, case)
            for reading in (lambda: swapped_outputs(name, a, refs or {}),
                            lambda: upstream_forgotten(case, a, r),
                            lambda: layout.reversed_axis(a, r),
                            lambda: layout.permuted_reshape(a, r),
                            lambda: wrong_axis(case, name, a, reference),
                            lambda: option_ignored(case, name, a, reference),
                            lambda: upstream_replaced(ex, case, name, a, reference, refs),
                            lambda: wrong_point(case, name, a, reference, refs),
                            lambda: term_off(ex, name, a, r, variants)):
                if out:
                    break
                reading = reading()
                if reading is not None:
                    out.append(reading)
                    break
    known = {k for k, _ in out}
    out += [h for h in diagnose.hints(got, ref, case.factors)
            if not (out and h[0].startswith("factor:")) and h[0] not in known]
    return out
