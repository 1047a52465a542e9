"""Where the time of a TransformerEncoderLayer forward+backward goes (cProfile, by function).

    python benchmarks/profile_layer.py [--batch 4 --seq 512 --dtype float32 --activation gelu]
    python benchmarks/profile_layer.py --by-op        # wall time of each functional op, no profiler

``--by-op`` times every call of the functional core's ops (``F.linear_forward``, ``F.gelu_backward``,
``F.scaled_dot_product_attention_forward``, ...) inside real steps, with ``time.perf_counter`` around
each call and no profiler overhead; an op's time excludes the ops it calls (``multi_head_attention_*``
holds the fused projections, ``scaled_dot_product_attention_*`` the per-head products and the
softmax). What is left is the modules' own work.

NumPy's matrix products are not Python calls, so cProfile books each one to the function that issues
it: ``linear_forward``/``linear_backward`` are the projection and feed-forward GEMMs, the attention
functions hold the batched (B*H) score and context products plus the softmax's elementwise passes.
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy_transformer as nt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--activation", choices=["relu", "gelu"], default="gelu")
    p.add_argument("--attention", choices=["standard", "tiled"], default="standard")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--by-op", action="store_true", help="wall time per functional op instead of cProfile")
    a = p.parse_args()
    dt = np.dtype(a.dtype)
    layer = nt.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation=a.activation, dtype=dt, seed=0,
                                       attention=a.attention, block_size=256)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, a.seq, 512)).astype(dt)
    dy = rng.standard_normal((a.batch, a.seq, 512)).astype(dt)

    def run():
        for _ in range(a.steps):
            layer.zero_grad()
            layer(x)
            layer.backward(dy)

    run()
    if a.by_op:
        return by_op(run, a)
    prof = cProfile.Profile()
    prof.runcall(run)
    stats = pstats.Stats(prof)
    total = stats.total_tt
    print(f"{a.steps} forward+backward steps, (B, S) = ({a.batch}, {a.seq}), {a.dtype}, {a.activation}, "
          f"{a.attention}: {total / a.steps * 1e3:.1f} ms per step\n")
    rows = sorted(((v[2], k) for k, v in stats.stats.items()), reverse=True)[:12]
    print(f"{'share':>6} {'ms/step':>8}  function")
    for tottime, (fname, line, func) in rows:
        print(f"{100 * tottime / total:5.1f}% {tottime / a.steps * 1e3:8.2f}  "
              f"{func} ({os.path.basename(fname)}:{line})")


def by_op(run, a):
    """Wrap every function of ``numpy_transformer.functional`` wherever a module holds it (the modules
    import them by name), time ``run`` and print each op's share. An op's time is its own (its nested
    ops' time goes to them), so the shares add up."""
    import numpy_transformer.functional as F
    totals, stack = {}, []                      # stack: time spent in the nested ops of each open call

    def timed(name, fn):
        def call(*args, **kwargs):
            stack.append(0.0)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t
                nested = stack.pop()
                totals[name] = totals.get(name, 0.0) + elapsed - nested     # its own time only
                if stack:
                    stack[-1] += elapsed
        return call

    ops = {id(getattr(F, n)): (n, getattr(F, n)) for n in dir(F)
           if n.endswith(("_forward", "_backward")) and callable(getattr(F, n))}
    wrapped = {key: timed(name, fn) for key, (name, fn) in ops.items()}
    for mod in [m for name, m in sys.modules.items() if name.startswith("numpy_transformer") and m]:
        for attr, value in list(vars(mod).items()):
            if id(value) in wrapped and not attr.startswith("__"):
                setattr(mod, attr, wrapped[id(value)])
    run()
    totals.clear()
    t = time.perf_counter()
    run()
    total = time.perf_counter() - t
    print(f"{a.steps} forward+backward steps, (B, S) = ({a.batch}, {a.seq}), {a.dtype}, {a.activation}, "
          f"{a.attention}: {total / a.steps * 1e3:.1f} ms per step (wall time, no profiler)\n")
    print(f"{'share':>6} {'ms/step':>8}  op")
    for name, sec in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{100 * sec / total:5.1f}% {sec / a.steps * 1e3:8.2f}  {name}")
    rest = total - sum(totals.values())
    print(f"{100 * rest / total:5.1f}% {rest / a.steps * 1e3:8.2f}  (the modules' own work: residuals, checks, caches)")


if __name__ == "__main__":
    main()
