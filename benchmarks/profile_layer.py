"""Where the time of a TransformerEncoderLayer forward+backward goes (cProfile, by function).

    python benchmarks/profile_layer.py [--batch 4 --seq 512 --dtype float32 --activation gelu]

NumPy's matrix products are not Python calls, so cProfile books each one to the function that issues
it: ``linear_forward``/``linear_backward`` are the projection and feed-forward GEMMs, the attention
functions hold the batched (B*H) score and context products plus the softmax's elementwise passes.
"""

import argparse
import cProfile
import os
import pstats
import sys

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
    prof = cProfile.Profile()
    prof.runcall(run)
    stats = pstats.Stats(prof)
    total = stats.total_tt
    print(f"{a.steps} forward+backward steps, (B, S) = ({a.batch}, {a.seq}), {a.dtype}, {a.activation}, "
          f"{a.attention}: {total / a.steps * 1e3:.1f} ms per step\n")
    rows = sorted(((v[2], k) for k, v in stats.stats.items()), reverse=True)[:12]
    print(f"{'share':>6} {'ms/step':>8}  function")
    for tottime, (fname, line, func) in rows:
        print(f"{100 * tottime / total:5.1f}% {tottime / a.steps * 1e3:8.2f}  {func} ({os.path.basename(fname)}:{line})")


if __name__ == "__main__":
    main()
