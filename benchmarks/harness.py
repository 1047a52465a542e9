"""The benchmarks' timing harness: each side in a fresh process of its own, alternating, over rounds.

A user runs numpy-transformer alone, in a process of its own, with default settings. Timing it in the
same process as torch flatters one side or the other: one library's idle BLAS or pool threads keep
the cores while the other is timed. So every measurement here runs as

    round 1:  numpy process, then torch process
    round 2:  torch process, then numpy process       (alternating, so a change of load hits both)
    ...

each process building its case from the same seed (the torch side copies the NumPy model's weights),
running ``warmup`` untimed steps, then timing ``repeats`` steps. No environment variable is set in the
timed processes: both libraries run with their own defaults (torch: one thread per core; OpenBLAS:
one per core; numpy-transformer's elementwise pool: one per core).

The summary of a measurement: each side's median over all its timed steps, the ratio numpy / torch as
the median of the per-round ratios (each round's medians divided), and its spread, the lowest and
highest per-round ratio. The 1-minute load average is recorded before and after each case, because
on a shared machine it says how far to trust the figures.

Peak memory is measured in separate processes (``memory=True`` of :func:`peak_memory`), never in the
timed ones: those set glibc's ``MALLOC_MMAP_THRESHOLD_`` so that freed blocks leave the resident set
at once and the peak resident size measures live arrays; that setting would slow the timed steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT_DIR = os.path.join(ROOT, "benchmarks", "out")       # untracked (.gitignore)


def _median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def time_steps(steps, warmup, repeats):
    """``{name: [seconds, ...]}``: ``warmup`` untimed calls of each step, then ``repeats`` timed ones."""
    out = {}
    for name, step in steps.items():
        for _ in range(warmup):
            step()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        out[name] = times
    return out


def _status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def resident_growth(step):
    """Peak growth of the resident set (bytes) during one call of ``step`` after a warm-up call."""
    step()                                    # first-call allocations are not the steady state
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                          # reset the peak resident size (VmHWM) to the current one
    before = _status("VmRSS")
    step()
    return max(_status("VmHWM") - before, 0)


def _run_child(script, request, env=None):
    cmd = [sys.executable, script, "--child", json.dumps(request)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child {request['side']} of {request['case']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(script, case, kw, sides=("numpy", "torch"), rounds=3, warmup=2, repeats=7, env=None):
    """Time ``case`` on each side in fresh processes, alternating over ``rounds``.

    ``script`` must answer ``--child JSON`` by building the case for ``request["side"]`` and printing
    :func:`child_reply` (see :func:`serve_child`). Returns ``{"sides": {side: {name: {"median_ms",
    "rounds_ms"}}}, "ratio": {name: {"median", "low", "high"}}, "load": [before, after], "extra":
    {side: ...}}``; the ratio is ``sides[0] / sides[1]``.
    """
    load_before = os.getloadavg()[0]
    per_round = {side: {} for side in sides}        # side -> name -> [[seconds of round r], ...]
    extra = {}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            got = _run_child(script, dict(case=case, side=side, kw=kw, warmup=warmup, repeats=repeats), env)
            for name, times in got["seconds"].items():
                per_round[side].setdefault(name, []).append(times)
            extra.setdefault(side, got.get("extra"))
    summary = {side: {name: {"median_ms": 1e3 * _median([t for rnd in rounds_ for t in rnd]),
                             "rounds_ms": [1e3 * _median(rnd) for rnd in rounds_]}
                      for name, rounds_ in names.items()}
               for side, names in per_round.items()}
    a, b = sides
    ratio = {}
    for name in summary[a]:
        rr = [x / y for x, y in zip(summary[a][name]["rounds_ms"], summary[b][name]["rounds_ms"])]
        ratio[name] = {"median": _median(rr), "low": min(rr), "high": max(rr)}
    return {"sides": summary, "ratio": ratio, "load": [load_before, os.getloadavg()[0]], "extra": extra}


def single(script, case, kw, side, warmup=2, repeats=7, extra=False):
    """One side alone in one fresh process: ``{name: median ms}`` (``extra=True``: the reply's extra)."""
    got = _run_child(script, dict(case=case, side=side, kw=kw, warmup=warmup, repeats=repeats))
    return got["extra"] if extra else {name: 1e3 * _median(t) for name, t in got["seconds"].items()}


def peak_memory(script, case, kw, side):
    """Peak resident growth (bytes) of one step of ``case`` on ``side``, in a fresh process of its own."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    return _run_child(script, dict(case=case, side=side, kw=kw, memory=True), env)["peak_bytes"]


def serve_child(request_json, cases):
    """The child's side: build ``cases[case](side, **kw)`` -> ``(steps, extra)`` (``steps``: ``{name:
    callable}``; ``extra``: anything JSON, e.g. generated tokens), time it or measure its memory, and
    print the reply as one JSON line."""
    request = json.loads(request_json)
    steps, extra = cases[request["case"]](request["side"], **request["kw"])
    if request.get("memory"):
        reply = {"peak_bytes": resident_growth(next(iter(steps.values())))}
    else:
        reply = {"seconds": time_steps(steps, request["warmup"], request["repeats"]), "extra": extra}
    print(json.dumps(reply))
    return 0


def load_text(result):
    """``"load 2.1-2.6"``: the 1-minute load average before and after a case."""
    lo, hi = sorted(result["load"])
    return f"load {lo:.1f}-{hi:.1f}"


def write_json(path, payload):
    """Write ``payload`` to ``path`` (creating its folder); returns the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    return path
