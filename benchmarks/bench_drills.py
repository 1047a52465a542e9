"""Wall time of ``drill check FILE`` per exercise, passing and failing, as a user runs it.

Each measurement is a fresh ``python -m numpy_transformer drill check FILE`` (interpreter start to exit,
the grading child's start-up included), timed from the outside. Per exercise two files are checked:

* passing: the exercise's ``solution.py`` (with its ``# drill:`` header);
* failing: the same solution with the first of its ``mistakes.py`` patches applied.

The passing and failing runs alternate over ``--rounds`` rounds (so a change of load hits both) and the
median wall time of each is printed, with the 1-minute load average before and after. The goal the
drills keep (docs/drills.md, "Speed"): every check, passing or failing, under 2 s on 2 cores.

    .venv/bin/python benchmarks/bench_drills.py                  # every exercise, 3 rounds
    .venv/bin/python benchmarks/bench_drills.py --only mha gelu  # some of them
    .venv/bin/python benchmarks/bench_drills.py --mistake all    # every listed mistake once (slower)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from numpy_transformer.drills.engine.definition import apply_patches  # noqa: E402
from numpy_transformer.drills.exercises import EXERCISES, get  # noqa: E402


def _write(folder, ex, patches, tag):
    with open(ex.solution_path, encoding="utf-8") as fh:
        source = fh.read()
    source = apply_patches(source, patches) if patches else source
    if source is None:
        raise SystemExit(f"error: a patch of {ex.name} does not apply to its solution.py")
    path = os.path.join(folder, f"{ex.name}_{tag}.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"# drill: {ex.name}\n" + source)
    return path


def time_check(path, expect):
    """``(wall, cpu)`` seconds of one ``drill check path``, process start to exit (cpu: user + system of
    the checking process and its grading child); its exit status must be ``expect``."""
    env = dict(os.environ, NT_DRILL_DATA=os.path.dirname(path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)       # a user's interpreter reads and writes its .pyc files
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "numpy_transformer", "drill", "check", path],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != expect:
        tail = proc.stdout.decode(errors="replace")[-600:]
        raise SystemExit(f"error: {os.path.basename(path)} exited {proc.returncode}, expected {expect}:\n{tail}")
    return wall, cpu


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per file (default 3)")
    p.add_argument("--only", nargs="*", default=None, help="exercise names (default: every one)")
    p.add_argument("--mistake", choices=("first", "all"), default="first",
                   help="failing file: the first listed mistake (default) or each listed mistake once")
    args = p.parse_args(argv)
    names = [get(n).name for n in args.only] if args.only else sorted(EXERCISES, key=lambda n: EXERCISES[n].order)
    print(f"load before: {os.getloadavg()[0]:.2f}  (wall and cpu: medians in seconds; cpu = user + system of the "
          "check and its child)")
    print(f"{'exercise':32s} {'pass wall':>9s} {'pass cpu':>8s} {'fail wall':>9s} {'fail cpu':>8s} "
          f"{'worst fail':>10s}")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-drills-") as tmp:
        for name in names:
            ex = EXERCISES[name]
            good = _write(tmp, ex, (), "pass")
            mistakes = ex.mistakes if args.mistake == "all" else ex.mistakes[:1]
            bad = [_write(tmp, ex, m.patches, f"fail{k}") for k, m in enumerate(mistakes)]
            passing, failing, per_mistake = [], [], []
            for r in range(args.rounds):
                order = [(good, 0), (bad[0], 1)] if r % 2 == 0 else [(bad[0], 1), (good, 0)]
                for path, rc in order:
                    (passing if rc == 0 else failing).append(time_check(path, rc))
            for path in bad[1:]:
                per_mistake.append(time_check(path, 1)[0])
            pw, pc = (statistics.median(t[k] for t in passing) for k in (0, 1))
            fw, fc = (statistics.median(t[k] for t in failing) for k in (0, 1))
            top = max([fw] + per_mistake)
            worst = max(worst, pw, top)
            print(f"{name:32s} {pw:9.2f} {pc:8.2f} {fw:9.2f} {fc:8.2f} {top:10.2f}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}; slowest check: {worst:.2f} s wall (goal: under 2 s on a quiet "
          "2-core machine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
