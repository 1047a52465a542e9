"""Grouped-query attention: time and peak memory of ``F.scaled_dot_product_attention_forward(...,
enable_gqa=True)`` (forward + backward) against repeating K and V to every query head first, and the KV
cache a decoder keeps per token.

    .venv/bin/python benchmarks/bench_gqa.py [--batch 4 --seq 512 --heads 8 --head-dim 64 --dtype float32]

Peak memory is NumPy's allocations traced by ``tracemalloc`` during one forward + backward (deterministic,
unlike timings on a shared machine). The scores (B, Hq, S, T) dominate both paths: GQA saves the key and
value copies and, above all, the KV cache (``2 * Hkv * Dh`` numbers per token and layer instead of
``2 * H * Dh``).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from numpy_transformer import functional as F


def step(q, k, v, dout, repeat):
    """One forward + backward; ``repeat``: materialise K, V at Hq heads (and sum their gradients back)."""
    g = q.shape[1] // k.shape[1]
    if repeat:
        kr, vr = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)              # (B, Hq, T, Dh) copies
        _, cache = F.scaled_dot_product_attention_forward(q, kr, vr)
        dq, dkr, dvr = F.scaled_dot_product_attention_backward(dout, cache)
        b, _, t, dh = k.shape
        return dq, dkr.reshape(b, -1, g, t, dh).sum(axis=2), dvr.reshape(b, -1, g, t, dh).sum(axis=2)
    _, cache = F.scaled_dot_product_attention_forward(q, k, v, enable_gqa=True)
    return F.scaled_dot_product_attention_backward(dout, cache)


def measure(q, k, v, dout, repeat, repeats=5):
    tracemalloc.start()
    step(q, k, v, dout, repeat)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(q, k, v, dout, repeat)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3, peak / 2**20


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    dt = np.dtype(a.dtype)
    b, h, s, dh = a.batch, a.heads, a.seq, a.head_dim
    q = rng.standard_normal((b, h, s, dh)).astype(dt)
    dout = rng.standard_normal((b, h, s, dh)).astype(dt)
    print(f"B={b} S=T={s} Hq={h} Dh={dh} {a.dtype}: one forward + backward")
    print(f"{'Hkv':>4} {'path':<22} {'ms':>9} {'peak MiB':>9} {'KV cache per token and layer':>30}")
    for hkv in sorted({h, max(h // 4, 1), 1}, reverse=True):
        k = rng.standard_normal((b, hkv, s, dh)).astype(dt)
        v = rng.standard_normal((b, hkv, s, dh)).astype(dt)
        for repeat in ((False,) if hkv == h else (False, True)):
            ms, mib = measure(q, k, v, dout, repeat, a.repeats)
            path = "repeat K, V to Hq" if repeat else ("enable_gqa=True" if hkv < h else "multi-head")
            print(f"{hkv:>4} {path:<22} {ms:>9.1f} {mib:>9.1f} {2 * hkv * dh:>20} numbers")


if __name__ == "__main__":
    main()
