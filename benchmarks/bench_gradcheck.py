"""gradcheck's fast mode against its full mode on an encoder layer: the speedup, and that both pass.

Each run is a fresh process (``--one MODE``) timing ``nt.gradcheck_module`` on a float64
``TransformerEncoderLayer`` (every input and parameter, eval mode); the two modes alternate, ``--repeats``
processes each, and the medians are reported::

    .venv/bin/python benchmarks/bench_gradcheck.py                      # d_model 16, 5 repeats
    .venv/bin/python benchmarks/bench_gradcheck.py --d-model 32 --repeats 3

Needs NumPy only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one(mode, d_model, batch, seq):
    import numpy as np

    import numpy_transformer as nt
    layer = nt.TransformerEncoderLayer(d_model, 2, dim_feedforward=2 * d_model, dtype=np.float64, seed=0)
    x = np.random.default_rng(1).standard_normal((batch, seq, d_model))
    t0 = time.perf_counter()
    res = nt.gradcheck_module(layer, x, fast_mode=(mode == "fast"), verbose=False)
    wall = time.perf_counter() - t0
    elements = sum(c.total for c in res.checks)
    return {"mode": mode, "seconds": wall, "passed": res.passed, "tensors": len(res.checks), "elements": elements,
            "worst_rel": max(c.max_rel_err for c in res.checks)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=16)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--one", choices=["full", "fast"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.d_model, args.batch, args.seq)))
        return 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    runs = {"full": [], "fast": []}
    for _ in range(args.repeats):
        for mode in ("full", "fast"):                     # alternate: a load change hits both modes alike
            out = subprocess.run([sys.executable, __file__, "--one", mode, "--d-model", str(args.d_model),
                                  "--batch", str(args.batch), "--seq", str(args.seq)],
                                 capture_output=True, text=True, env=env, check=True)
            runs[mode].append(json.loads(out.stdout))
    full, fast = (statistics.median(r["seconds"] for r in runs[m]) for m in ("full", "fast"))
    info = runs["full"][0]
    print(f"gradcheck_module on TransformerEncoderLayer(d_model={args.d_model}, nhead=2, dim_feedforward="
          f"{2 * args.d_model}), x {(args.batch, args.seq, args.d_model)}, float64: {info['tensors']} tensors, "
          f"{info['elements']} elements; medians of {args.repeats} fresh processes each")
    for m, med in (("full", full), ("fast", fast)):
        r = runs[m]
        print(f"  {m}: median {med:.3f} s (min {min(x['seconds'] for x in r):.3f}, max "
              f"{max(x['seconds'] for x in r):.3f}); all passed: {all(x['passed'] for x in r)}; worst relative "
              f"error {max(x['worst_rel'] for x in r):.2e}")
    print(f"  speedup: {full / fast:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
